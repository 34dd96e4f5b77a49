#pragma once
// PeerId: who an installation is. base32(SHA-256(raw Ed25519 public key)),
// truncated to 32 characters (160 bits), lowercase. A link pins the
// provider's PeerId; the TLS layer refuses any other key (crypto/tls.hpp).
//
//   raw public key (32 bytes) --SHA-256--> 32 bytes --base32--> 52 chars --first 32--> PeerId
//
// A value type: cheap to copy, ordered, hashable. A default-constructed
// PeerId is empty() and matches no key; every other PeerId is well-formed.

#include "core/error.hpp"

#include <openssl/evp.h>

#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

namespace runsnack {

class PeerId {
 public:
  static constexpr std::size_t kLength = 32;  // base32 characters

  PeerId() = default;

  // Exactly 32 base32 characters. Upper case is read as lower case (the
  // canonical spelling str() returns); anything else is a one-line error.
  static Result<PeerId> parse(std::string_view text);

  // Precondition: `key` is an Ed25519 key (public or private); throws
  // std::invalid_argument otherwise, as that is a bug of the caller.
  static PeerId from_public_key(const EVP_PKEY* key);
  static PeerId from_raw_public_key(std::span<const std::uint8_t, 32> raw);

  const std::string& str() const noexcept { return text_; }
  bool empty() const noexcept { return text_.empty(); }

  friend bool operator==(const PeerId&, const PeerId&) = default;
  friend std::strong_ordering operator<=>(const PeerId&, const PeerId&) = default;

 private:
  explicit PeerId(std::string text) : text_(std::move(text)) {}
  std::string text_;
};

}  // namespace runsnack

template <>
struct std::hash<runsnack::PeerId> {
  std::size_t operator()(const runsnack::PeerId& id) const noexcept {
    return std::hash<std::string>{}(id.str());
  }
};
