#pragma once
// Internal to the crypto layer: unique_ptr owners for OpenSSL objects (so no
// raw owning pointer leaves a function) and a helper that turns the OpenSSL
// error queue into one line for an Error message.

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <memory>
#include <string>

namespace runsnack::ossl {

struct PkeyFree { void operator()(EVP_PKEY* p) const noexcept { EVP_PKEY_free(p); } };
struct PkeyCtxFree { void operator()(EVP_PKEY_CTX* p) const noexcept { EVP_PKEY_CTX_free(p); } };
struct MdCtxFree { void operator()(EVP_MD_CTX* p) const noexcept { EVP_MD_CTX_free(p); } };
struct X509Free { void operator()(X509* p) const noexcept { X509_free(p); } };
struct BioFree { void operator()(BIO* p) const noexcept { BIO_free_all(p); } };
struct SslCtxFree { void operator()(SSL_CTX* p) const noexcept { SSL_CTX_free(p); } };
struct SslFree { void operator()(SSL* p) const noexcept { SSL_free(p); } };

using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using PkeyCtxPtr = std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using BioPtr = std::unique_ptr<BIO, BioFree>;
using SslCtxPtr = std::unique_ptr<SSL_CTX, SslCtxFree>;
using SslPtr = std::unique_ptr<SSL, SslFree>;

// "<what>: <first OpenSSL error reason>" and clears the thread's error queue,
// so a later failure does not report a stale reason.
std::string error_text(const std::string& what);

}  // namespace runsnack::ossl
