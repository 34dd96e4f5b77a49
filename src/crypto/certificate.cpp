#include "crypto/certificate.hpp"

#include "crypto/secret.hpp"

#include <openssl/bn.h>

#include <ctime>

namespace runsnack {
namespace {

constexpr long kBackdateSeconds = 24L * 3600;         // tolerate a peer's clock running behind
constexpr long kValidityDays = 100L * 365;            // "forever": trust comes from the pin

struct BnFree { void operator()(BIGNUM* p) const noexcept { BN_free(p); } };

}  // namespace

Result<ossl::X509Ptr> make_self_signed_certificate(EVP_PKEY* key, const PeerId& id) {
  ossl::X509Ptr cert(X509_new());
  if (!cert) return fail(errc::internal, ossl::error_text("X509_new"));

  auto serial_bytes = random_bytes(16);
  serial_bytes[0] &= 0x7f;  // keep the serial positive, as RFC 5280 asks
  std::unique_ptr<BIGNUM, BnFree> serial(BN_bin2bn(serial_bytes.data(), static_cast<int>(serial_bytes.size()), nullptr));
  std::time_t now = std::time(nullptr);
  X509_NAME* name = X509_get_subject_name(cert.get());
  bool ok = serial && X509_set_version(cert.get(), X509_VERSION_3) == 1 &&
            BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) != nullptr &&
            X509_time_adj_ex(X509_getm_notBefore(cert.get()), 0, -kBackdateSeconds, &now) != nullptr &&
            X509_time_adj_ex(X509_getm_notAfter(cert.get()), static_cast<int>(kValidityDays), 0, &now) != nullptr &&
            X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                       reinterpret_cast<const unsigned char*>(id.str().c_str()), -1, -1, 0) == 1 &&
            X509_set_issuer_name(cert.get(), name) == 1 && X509_set_pubkey(cert.get(), key) == 1 &&
            // Ed25519 signs the message itself: no separate digest.
            X509_sign(cert.get(), key, nullptr) > 0;
  if (!ok) return fail(errc::internal, ossl::error_text("cannot make the identity certificate"));
  return cert;
}

}  // namespace runsnack
