#include "crypto/tls.hpp"

#include "crypto/ossl.hpp"

#include <openssl/err.h>
#include <openssl/x509_vfy.h>

#include <cstring>

namespace runsnack {
namespace {

constexpr const char* kCipherSuites = "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384";
constexpr const char* kSigAlgs = "ed25519";  // identity keys are Ed25519 only
constexpr const char* kExporterLabel = "EXPORTER-runsnack-auth";
constexpr unsigned char kSessionIdContext[] = "runsnack";

// What expect_peer() stores on an SSL: the pin, and what the peer presented
// when the pin refused it.
struct Pin {
  PeerId expected;
  std::optional<PeerId> rejected;
};

void free_pin(void*, void* ptr, CRYPTO_EX_DATA*, int, long, void*) { delete static_cast<Pin*>(ptr); }

// SSL_dup copies ex_data pointers; give the copy its own Pin so each is freed once.
int dup_pin(CRYPTO_EX_DATA*, const CRYPTO_EX_DATA*, void** from_d, int, long, void*) {
  if (from_d != nullptr && *from_d != nullptr) *from_d = new Pin(*static_cast<Pin*>(*from_d));
  return 1;
}

int pin_index() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, dup_pin, free_pin);
  return index;
}

Pin* pin_of(const SSL* ssl) { return static_cast<Pin*>(SSL_get_ex_data(ssl, pin_index())); }

// Replaces OpenSSL's chain verification (there is no CA to chain to): the
// only question is whose key the leaf certificate carries.
int verify_peer_key(X509_STORE_CTX* store, void*) {
  X509* leaf = X509_STORE_CTX_get0_cert(store);
  EVP_PKEY* key = leaf != nullptr ? X509_get0_pubkey(leaf) : nullptr;
  if (key == nullptr || EVP_PKEY_get_id(key) != EVP_PKEY_ED25519) {
    X509_STORE_CTX_set_error(store, X509_V_ERR_APPLICATION_VERIFICATION);
    return 0;
  }
  auto* ssl = static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  if (Pin* pin = ssl != nullptr ? pin_of(ssl) : nullptr) {
    PeerId seen = PeerId::from_public_key(key);
    if (seen != pin->expected) {
      pin->rejected = std::move(seen);
      X509_STORE_CTX_set_error(store, X509_V_ERR_APPLICATION_VERIFICATION);
      return 0;
    }
  }
  X509_STORE_CTX_set_error(store, X509_V_OK);
  return 1;
}

}  // namespace

Result<SSL_CTX*> make_tls_context(const Identity& identity, TlsRole role) {
  ossl::SslCtxPtr ctx(SSL_CTX_new(role == TlsRole::client ? TLS_client_method() : TLS_server_method()));
  if (!ctx) return fail(errc::internal, ossl::error_text("SSL_CTX_new"));
  SSL_CTX* c = ctx.get();
  bool ok = SSL_CTX_set_min_proto_version(c, TLS1_3_VERSION) == 1 &&
            SSL_CTX_set_max_proto_version(c, TLS1_3_VERSION) == 1 &&
            SSL_CTX_set_ciphersuites(c, kCipherSuites) == 1 && SSL_CTX_set1_sigalgs_list(c, kSigAlgs) == 1 &&
            SSL_CTX_set1_client_sigalgs_list(c, kSigAlgs) == 1 &&
            SSL_CTX_use_certificate(c, identity.certificate()) == 1 &&
            SSL_CTX_use_PrivateKey(c, identity.key()) == 1 && SSL_CTX_check_private_key(c) == 1 &&
            SSL_CTX_set_num_tickets(c, 0) == 1 &&
            SSL_CTX_set_session_id_context(c, kSessionIdContext, sizeof kSessionIdContext - 1) == 1;
  if (!ok) return fail(errc::internal, ossl::error_text("cannot configure TLS"));
  SSL_CTX_set_options(c, SSL_OP_NO_TICKET | SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_verify(c, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  SSL_CTX_set_cert_verify_callback(c, verify_peer_key, nullptr);
  return ctx.release();
}

void expect_peer(SSL* ssl, const PeerId& expected) {
  int index = pin_index();
  delete static_cast<Pin*>(SSL_get_ex_data(ssl, index));
  SSL_set_ex_data(ssl, index, new Pin{expected, std::nullopt});
}

std::optional<PeerId> rejected_peer(const SSL* ssl) {
  const Pin* pin = pin_of(ssl);
  return pin != nullptr ? pin->rejected : std::nullopt;
}

Result<PeerId> peer_of(const SSL* ssl) {
  X509* cert = SSL_get0_peer_certificate(ssl);
  EVP_PKEY* key = cert != nullptr ? X509_get0_pubkey(cert) : nullptr;
  if (key == nullptr) return fail(errc::auth_failed, "peer presented no certificate");
  if (EVP_PKEY_get_id(key) != EVP_PKEY_ED25519)
    return fail(errc::auth_failed, "peer certificate key is not Ed25519");
  return PeerId::from_public_key(key);
}

Result<std::array<std::uint8_t, 32>> channel_binding(SSL* ssl) {
  std::array<std::uint8_t, 32> out{};
  if (!SSL_is_init_finished(ssl)) return fail(errc::invalid_argument, "channel binding before the TLS handshake");
  if (SSL_export_keying_material(ssl, out.data(), out.size(), kExporterLabel, std::strlen(kExporterLabel), nullptr,
                                 0, 0) != 1)
    return fail(errc::internal, ossl::error_text("TLS exporter failed"));
  return out;
}

}  // namespace runsnack
