#include "crypto/identity.hpp"

#include "core/paths.hpp"
#include "crypto/secret.hpp"

#include <gtest/gtest.h>
#include <openssl/pem.h>

#include <sys/stat.h>

#include <thread>

namespace runsnack {
namespace {

namespace fs = std::filesystem;

std::vector<std::uint8_t> bytes(std::string_view s) { return {s.begin(), s.end()}; }

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = random_bytes(8);
    std::string name = "runsnack-identity-test-";
    for (auto b : r) name += "0123456789abcdef"[b & 15];
    dir_ = fs::temp_directory_path() / name;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  ::stat(p.c_str(), &st);
  return st.st_mode & 0777;
}

TEST(Identity, SignAndVerify) {
  auto id = Identity::generate();
  ASSERT_TRUE(id) << id.error().what();
  auto sig = id->sign(bytes("result 42"));
  ASSERT_TRUE(sig);
  EXPECT_EQ(sig->size(), 64u);
  auto raw = id->public_key_raw();
  EXPECT_EQ(PeerId::from_raw_public_key(raw), id->peer_id());
  EXPECT_TRUE(Identity::verify(id->peer_id(), id->key(), bytes("result 42"), *sig));
  EXPECT_TRUE(Identity::verify(id->peer_id(), raw, bytes("result 42"), *sig));
  EXPECT_FALSE(Identity::verify(id->peer_id(), raw, bytes("result 43"), *sig));
  auto other = Identity::generate();
  ASSERT_TRUE(other);
  // A valid signature by the wrong peer is still refused.
  EXPECT_FALSE(Identity::verify(other->peer_id(), raw, bytes("result 42"), *sig));
  (*sig)[0] ^= 1;
  EXPECT_FALSE(Identity::verify(id->peer_id(), raw, bytes("result 42"), *sig));
}

TEST(Identity, CertificateIsSelfSignedOverTheKeyWithPeerIdAsName) {
  auto id = Identity::generate();
  ASSERT_TRUE(id);
  X509* cert = id->certificate();
  ASSERT_NE(cert, nullptr);
  EXPECT_EQ(EVP_PKEY_eq(X509_get0_pubkey(cert), id->key()), 1);
  EXPECT_EQ(X509_verify(cert, X509_get0_pubkey(cert)), 1);
  char cn[64] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn);
  EXPECT_EQ(std::string(cn), id->peer_id().str());
  EXPECT_EQ(X509_cmp_current_time(X509_get0_notBefore(cert)), -1);
  EXPECT_EQ(X509_cmp_current_time(X509_get0_notAfter(cert)), 1);
}

TEST_F(TempDir, LoadOrCreateCreatesOnceWithMode0600) {
  auto first = Identity::load_or_create(dir_);
  ASSERT_TRUE(first) << first.error().what();
  fs::path file = dir_ / "identity.pem";
  ASSERT_TRUE(fs::exists(file));
  EXPECT_EQ(mode_of(file), 0600u);
  auto pem = read_file(file, 4096);
  ASSERT_TRUE(pem);
  EXPECT_NE(pem->find("-----BEGIN PRIVATE KEY-----"), std::string::npos);  // PKCS#8
  auto second = Identity::load_or_create(dir_);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->peer_id(), first->peer_id());
  // No temporary files left behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(TempDir, ConcurrentFirstUseAgreesOnOneKey) {
  constexpr int kThreads = 4;
  std::vector<PeerId> ids(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      auto id = Identity::load_or_create(dir_);
      if (id) ids[static_cast<std::size_t>(i)] = id->peer_id();
    });
  for (auto& t : threads) t.join();
  for (const auto& id : ids) {
    EXPECT_FALSE(id.empty());
    EXPECT_EQ(id, ids[0]);
  }
  EXPECT_EQ(Identity::load_or_create(dir_)->peer_id(), ids[0]);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(TempDir, LoadTightensAReadableKeyFile) {
  ASSERT_TRUE(Identity::load_or_create(dir_));
  fs::path file = dir_ / "identity.pem";
  ::chmod(file.c_str(), 0644);
  ASSERT_TRUE(Identity::load_or_create(dir_));
  EXPECT_EQ(mode_of(file), 0600u);
}

TEST_F(TempDir, GarbageKeyFileIsAnErrorNotReplaced) {
  fs::create_directories(dir_);
  fs::path file = dir_ / "identity.pem";
  ASSERT_TRUE(write_file_atomic(file, "not a key\n", 0600));
  auto id = Identity::load_or_create(dir_);
  ASSERT_FALSE(id);
  EXPECT_TRUE(id.error().is(errc::malformed));
  EXPECT_NE(id.error().message.find("identity.pem"), std::string::npos);
  EXPECT_EQ(*read_file(file, 100), "not a key\n");
}

TEST_F(TempDir, NonEd25519KeyIsRefused) {
  fs::create_directories(dir_);
  ossl::PkeyPtr ec(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  ASSERT_TRUE(ec);
  ossl::BioPtr bio(BIO_new(BIO_s_mem()));
  ASSERT_EQ(PEM_write_bio_PrivateKey(bio.get(), ec.get(), nullptr, nullptr, 0, nullptr, nullptr), 1);
  char* data = nullptr;
  long len = BIO_get_mem_data(bio.get(), &data);
  ASSERT_TRUE(write_file_atomic(dir_ / "identity.pem", std::string_view(data, static_cast<std::size_t>(len)), 0600));
  auto id = Identity::load_or_create(dir_);
  ASSERT_FALSE(id);
  EXPECT_TRUE(id.error().is(errc::unsupported));
}

}  // namespace
}  // namespace runsnack
