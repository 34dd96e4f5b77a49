#pragma once
// This installation's long-term identity: an Ed25519 key, the PeerId derived
// from it, and a self-signed certificate over it for TLS.
//
// On disk: <dir>/identity.pem, PKCS#8 PEM, mode 0600. Created on first use;
// creation is atomic and race-free (two processes starting at once end up
// with the same key). A key file readable by group or others is tightened
// to 0600 with a warning rather than refused, since the key may already
// have leaked and refusing would not undo that; the owner is told.
//
// Move-only. The const accessors may be used from several threads.

#include "core/error.hpp"
#include "crypto/ossl.hpp"
#include "crypto/peer_id.hpp"

#include <array>
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace runsnack {

class Identity {
 public:
  static constexpr const char* kFileName = "identity.pem";

  // Loads <dir>/identity.pem, creating it (and `dir`) when missing. Fails on
  // an unreadable or malformed file or a key that is not Ed25519; never
  // overwrites an existing file.
  static Result<Identity> load_or_create(const std::filesystem::path& dir);
  // A fresh key held in memory only (tests, throwaway peers).
  static Result<Identity> generate();

  Identity(Identity&&) noexcept = default;
  Identity& operator=(Identity&&) noexcept = default;
  Identity(const Identity&) = delete;
  Identity& operator=(const Identity&) = delete;

  const PeerId& peer_id() const noexcept { return peer_id_; }
  // Owned by this Identity; valid while it lives. OpenSSL users that keep
  // them (an SSL_CTX) take their own reference.
  EVP_PKEY* key() const noexcept { return key_.get(); }
  X509* certificate() const noexcept { return cert_.get(); }
  std::array<std::uint8_t, 32> public_key_raw() const;

  // Ed25519 signature (64 bytes) over `data`.
  Result<std::vector<std::uint8_t>> sign(std::span<const std::uint8_t> data) const;

  // Whether `signature` is a valid signature over `data` by a key whose
  // PeerId is `expected`. False for a key that is not Ed25519.
  static bool verify(const PeerId& expected, const EVP_PKEY* public_key, std::span<const std::uint8_t> data,
                     std::span<const std::uint8_t> signature);
  static bool verify(const PeerId& expected, std::span<const std::uint8_t, 32> raw_public_key,
                     std::span<const std::uint8_t> data, std::span<const std::uint8_t> signature);

 private:
  Identity(ossl::PkeyPtr key, ossl::X509Ptr cert, PeerId id)
      : key_(std::move(key)), cert_(std::move(cert)), peer_id_(std::move(id)) {}
  static Result<Identity> from_key(ossl::PkeyPtr key);

  ossl::PkeyPtr key_;
  ossl::X509Ptr cert_;
  PeerId peer_id_;
};

}  // namespace runsnack
