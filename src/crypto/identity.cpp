#include "crypto/identity.hpp"

#include "core/base32.hpp"
#include "core/paths.hpp"
#include "crypto/certificate.hpp"
#include "crypto/secret.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

namespace runsnack {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kMaxKeyFileBytes = 64 * 1024;  // a PEM Ed25519 key is ~120 bytes

// Encrypted keys are not supported: never let OpenSSL prompt on the terminal.
int no_passphrase(char*, int, int, void*) { return 0; }

Result<ossl::PkeyPtr> parse_pem(const std::string& pem, const fs::path& path) {
  ossl::BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return fail(errc::internal, ossl::error_text("BIO_new_mem_buf"));
  ossl::PkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, no_passphrase, nullptr));
  if (!key) return fail(errc::malformed, ossl::error_text(path.string() + " is not a PEM private key"));
  if (EVP_PKEY_get_id(key.get()) != EVP_PKEY_ED25519)
    return fail(errc::unsupported, path.string() + " holds a key that is not Ed25519");
  return key;
}

Result<std::string> to_pem(EVP_PKEY* key) {
  ossl::BioPtr bio(BIO_new(BIO_s_mem()));
  // PEM_write_bio_PrivateKey writes PKCS#8 ("BEGIN PRIVATE KEY") in OpenSSL 3.
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1)
    return fail(errc::internal, ossl::error_text("cannot encode the identity key"));
  char* data = nullptr;
  long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(len));
}

ossl::PkeyPtr new_ed25519_key() { return ossl::PkeyPtr(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519")); }

// A key file others can read may already be copied; tighten it and tell the
// owner, who can decide to make a new identity.
void tighten_mode(const fs::path& path, const struct stat& st) {
  if ((st.st_mode & 077) == 0) return;
  spdlog::warn("{} was readable by other users (mode {:o}); set to 0600. If others may have copied it, "
               "delete it to make a new identity (existing links will stop working).",
               path.string(), st.st_mode & 0777);
  ::chmod(path.c_str(), 0600);
}

Result<ossl::PkeyPtr> load_key(const fs::path& path, const struct stat& st) {
  tighten_mode(path, st);
  auto pem = read_file(path, kMaxKeyFileBytes);
  if (!pem) return pem.error();
  auto key = parse_pem(*pem, path);
  OPENSSL_cleanse(pem->data(), pem->size());
  return key;
}

// Writes a new key beside `path`, then hard-links it into place: link(2)
// fails with EEXIST when another process won the race, and then we use its
// key, so everyone agrees on one identity.
Result<ossl::PkeyPtr> create_key(const fs::path& path) {
  ossl::PkeyPtr key = new_ed25519_key();
  if (!key) return fail(errc::internal, ossl::error_text("cannot generate an Ed25519 key"));
  auto pem = to_pem(key.get());
  if (!pem) return pem.error();
  fs::path tmp = path;
  // Unique per attempt, so threads of one process do not share a temp file.
  tmp += ".new." + base32::encode(random_bytes(8));
  auto written = write_file_atomic(tmp, *pem, 0600);
  OPENSSL_cleanse(pem->data(), pem->size());
  if (!written) return written.error();
  int rc = ::link(tmp.c_str(), path.c_str());
  int err = errno;
  if (rc != 0 && err != EEXIST) {
    // Filesystems without hard links: plain rename (the race is then possible, but harmless to us).
    rc = ::rename(tmp.c_str(), path.c_str());
    err = errno;
  }
  ::unlink(tmp.c_str());
  if (rc == 0) return key;
  if (err != EEXIST) return fail(errc::io_error, "cannot create " + path.string() + ": " + std::strerror(err));
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return fail(errc::io_error, "cannot read " + path.string() + ": " + std::strerror(errno));
  return load_key(path, st);
}

}  // namespace

Result<Identity> Identity::from_key(ossl::PkeyPtr key) {
  PeerId id = PeerId::from_public_key(key.get());
  auto cert = make_self_signed_certificate(key.get(), id);
  if (!cert) return cert.error();
  return Identity(std::move(key), std::move(*cert), std::move(id));
}

Result<Identity> Identity::generate() {
  ossl::PkeyPtr key = new_ed25519_key();
  if (!key) return fail(errc::internal, ossl::error_text("cannot generate an Ed25519 key"));
  return from_key(std::move(key));
}

Result<Identity> Identity::load_or_create(const fs::path& dir) {
  std::error_code ec;
  if (fs::create_directories(dir, ec)) ::chmod(dir.c_str(), 0700);
  if (ec) return fail(errc::io_error, "cannot create " + dir.string() + ": " + ec.message());
  fs::path path = dir / kFileName;
  struct stat st {};
  bool exists = ::stat(path.c_str(), &st) == 0;
  if (!exists && errno != ENOENT)
    return fail(errc::io_error, "cannot read " + path.string() + ": " + std::strerror(errno));
  auto key = exists ? load_key(path, st) : create_key(path);
  if (!key) return key.error();
  return from_key(std::move(*key));
}

std::array<std::uint8_t, 32> Identity::public_key_raw() const {
  std::array<std::uint8_t, 32> raw{};
  std::size_t len = raw.size();
  // Cannot fail for an Ed25519 key, which the constructors guarantee.
  EVP_PKEY_get_raw_public_key(key_.get(), raw.data(), &len);
  return raw;
}

Result<std::vector<std::uint8_t>> Identity::sign(std::span<const std::uint8_t> data) const {
  ossl::MdCtxPtr ctx(EVP_MD_CTX_new());
  std::vector<std::uint8_t> sig(64);
  std::size_t len = sig.size();
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key_.get()) != 1 ||
      EVP_DigestSign(ctx.get(), sig.data(), &len, data.data(), data.size()) != 1)
    return fail(errc::internal, ossl::error_text("Ed25519 signing failed"));
  sig.resize(len);
  return sig;
}

bool Identity::verify(const PeerId& expected, const EVP_PKEY* public_key, std::span<const std::uint8_t> data,
                      std::span<const std::uint8_t> signature) {
  if (public_key == nullptr || EVP_PKEY_get_id(public_key) != EVP_PKEY_ED25519) return false;
  if (PeerId::from_public_key(public_key) != expected) return false;
  ossl::MdCtxPtr ctx(EVP_MD_CTX_new());
  // EVP_DigestVerifyInit takes a non-const key but only reads it.
  bool ok = ctx &&
            EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, const_cast<EVP_PKEY*>(public_key)) == 1 &&
            EVP_DigestVerify(ctx.get(), signature.data(), signature.size(), data.data(), data.size()) == 1;
  if (!ok) ERR_clear_error();
  return ok;
}

bool Identity::verify(const PeerId& expected, std::span<const std::uint8_t, 32> raw_public_key,
                      std::span<const std::uint8_t> data, std::span<const std::uint8_t> signature) {
  ossl::PkeyPtr key(
      EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, raw_public_key.data(), raw_public_key.size()));
  if (!key) {
    ERR_clear_error();
    return false;
  }
  return verify(expected, key.get(), data, signature);
}

}  // namespace runsnack
