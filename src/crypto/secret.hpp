#pragma once
// Secrets and the keyed primitives built on them (docs/ARCHITECTURE.md section 3).
//
// A link secret never leaves the consumer and is never stored by the
// provider. Both sides derive the grant key from it; the consumer proves it
// holds the key by a MAC over the TLS channel binding, so a proof is useless
// on any other connection:
//
//   grant key  = HKDF-SHA256(ikm = secret text, salt = "runsnack grant v1", info = "grant key", 32)
//   auth proof = HMAC-SHA256(grant key, "runsnack auth v1" || channel binding)
//
// All functions are thread-safe. OpenSSL failures inside them (out of memory,
// a broken RNG) are not expected failures: they throw std::runtime_error.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace runsnack {

using Key32 = std::array<std::uint8_t, 32>;

// `n` bytes from OpenSSL's CSPRNG.
std::vector<std::uint8_t> random_bytes(std::size_t n);

// RFC 5869 HKDF with SHA-256. `out_len` at most 255 * 32.
std::vector<std::uint8_t> hkdf_sha256(std::span<const std::uint8_t> ikm, std::span<const std::uint8_t> salt,
                                      std::span<const std::uint8_t> info, std::size_t out_len);

// RFC 2104 HMAC with SHA-256.
Key32 hmac_sha256(std::span<const std::uint8_t> key, std::span<const std::uint8_t> data);

// Equal length and equal bytes, in time independent of where they differ.
bool constant_time_equal(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b) noexcept;

// The grant key for a link secret (the base32 text after "#k="). Upper case
// is read as lower case, as the link parser does, so both spellings agree.
Key32 derive_grant_key(std::string_view secret_text);

// The consumer's proof of the grant key, bound to one TLS connection by its
// exporter value (crypto/tls.hpp channel_binding()).
Key32 auth_proof(const Key32& grant_key, std::span<const std::uint8_t> channel_binding);

}  // namespace runsnack
