#include "crypto/peer_id.hpp"

#include "core/base32.hpp"

#include <openssl/sha.h>

#include <algorithm>
#include <stdexcept>

namespace runsnack {

Result<PeerId> PeerId::parse(std::string_view text) {
  if (text.size() != kLength)
    return fail(errc::malformed,
                "peer id must be 32 base32 characters (got " + std::to_string(text.size()) + ")");
  if (!base32::is_alphabet(text))
    return fail(errc::malformed, "peer id must be base32 (letters a-z and digits 2-7)");
  std::string canonical(text);
  std::transform(canonical.begin(), canonical.end(), canonical.begin(),
                 [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; });
  return PeerId(std::move(canonical));
}

PeerId PeerId::from_raw_public_key(std::span<const std::uint8_t, 32> raw) {
  std::array<std::uint8_t, SHA256_DIGEST_LENGTH> digest{};
  SHA256(raw.data(), raw.size(), digest.data());
  std::string text = base32::encode(digest);
  text.resize(kLength);
  return PeerId(std::move(text));
}

PeerId PeerId::from_public_key(const EVP_PKEY* key) {
  if (key == nullptr || EVP_PKEY_get_id(key) != EVP_PKEY_ED25519)
    throw std::invalid_argument("PeerId::from_public_key needs an Ed25519 key");
  std::array<std::uint8_t, 32> raw{};
  std::size_t len = raw.size();
  if (EVP_PKEY_get_raw_public_key(key, raw.data(), &len) != 1 || len != raw.size())
    throw std::invalid_argument("PeerId::from_public_key: cannot read the raw public key");
  return from_raw_public_key(raw);
}

}  // namespace runsnack
