#include "crypto/secret.hpp"

#include "crypto/ossl.hpp"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>

#include <memory>
#include <stdexcept>
#include <string>

namespace runsnack {
namespace {

constexpr std::string_view kGrantSalt = "runsnack grant v1";
constexpr std::string_view kGrantInfo = "grant key";
constexpr std::string_view kAuthLabel = "runsnack auth v1";

std::span<const std::uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

[[noreturn]] void throw_openssl(const char* what) { throw std::runtime_error(ossl::error_text(what)); }

struct KdfFree { void operator()(EVP_KDF* p) const noexcept { EVP_KDF_free(p); } };
struct KdfCtxFree { void operator()(EVP_KDF_CTX* p) const noexcept { EVP_KDF_CTX_free(p); } };

}  // namespace

std::vector<std::uint8_t> random_bytes(std::size_t n) {
  std::vector<std::uint8_t> out(n);
  if (n > 0 && RAND_bytes(out.data(), static_cast<int>(n)) != 1) throw_openssl("RAND_bytes failed");
  return out;
}

std::vector<std::uint8_t> hkdf_sha256(std::span<const std::uint8_t> ikm, std::span<const std::uint8_t> salt,
                                      std::span<const std::uint8_t> info, std::size_t out_len) {
  if (out_len == 0 || out_len > 255 * 32) throw std::invalid_argument("hkdf_sha256: bad output length");
  std::unique_ptr<EVP_KDF, KdfFree> kdf(EVP_KDF_fetch(nullptr, "HKDF", nullptr));
  if (!kdf) throw_openssl("HKDF unavailable");
  std::unique_ptr<EVP_KDF_CTX, KdfCtxFree> ctx(EVP_KDF_CTX_new(kdf.get()));
  if (!ctx) throw_openssl("HKDF context");
  // OSSL_PARAM wants non-const pointers but does not write through them.
  char digest[] = "SHA256";
  auto* ikm_p = const_cast<std::uint8_t*>(ikm.data());
  auto* salt_p = const_cast<std::uint8_t*>(salt.data());
  auto* info_p = const_cast<std::uint8_t*>(info.data());
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, ikm_p, ikm.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, salt_p, salt.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info_p, info.size()),
      OSSL_PARAM_construct_end(),
  };
  std::vector<std::uint8_t> out(out_len);
  if (EVP_KDF_derive(ctx.get(), out.data(), out.size(), params) != 1) throw_openssl("HKDF failed");
  return out;
}

Key32 hmac_sha256(std::span<const std::uint8_t> key, std::span<const std::uint8_t> data) {
  Key32 out{};
  std::size_t len = 0;
  // EVP_Q_mac rejects a NULL key pointer even for length 0.
  static const std::uint8_t kEmpty = 0;
  const std::uint8_t* key_p = key.empty() ? &kEmpty : key.data();
  if (EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, key_p, key.size(), data.data(), data.size(),
                out.data(), out.size(), &len) == nullptr ||
      len != out.size())
    throw_openssl("HMAC-SHA256 failed");
  return out;
}

bool constant_time_equal(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b) noexcept {
  if (a.size() != b.size()) return false;
  return a.empty() || CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Key32 derive_grant_key(std::string_view secret_text) {
  std::string canonical(secret_text);
  for (char& c : canonical)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  auto okm = hkdf_sha256(bytes_of(canonical), bytes_of(kGrantSalt), bytes_of(kGrantInfo), 32);
  Key32 key{};
  std::copy(okm.begin(), okm.end(), key.begin());
  OPENSSL_cleanse(canonical.data(), canonical.size());
  return key;
}

Key32 auth_proof(const Key32& grant_key, std::span<const std::uint8_t> channel_binding) {
  std::vector<std::uint8_t> message(kAuthLabel.begin(), kAuthLabel.end());
  message.insert(message.end(), channel_binding.begin(), channel_binding.end());
  return hmac_sha256(grant_key, message);
}

}  // namespace runsnack
