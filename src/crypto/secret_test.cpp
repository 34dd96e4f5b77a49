#include "crypto/secret.hpp"

#include <gtest/gtest.h>

#include <string>

namespace runsnack {
namespace {

std::vector<std::uint8_t> hex(std::string_view h) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2)
    out.push_back(static_cast<std::uint8_t>(std::stoi(std::string(h.substr(i, 2)), nullptr, 16)));
  return out;
}

std::vector<std::uint8_t> bytes(std::string_view s) { return {s.begin(), s.end()}; }

TEST(Secret, HkdfRfc5869TestCase1) {
  auto okm = hkdf_sha256(std::vector<std::uint8_t>(22, 0x0b), hex("000102030405060708090a0b0c"),
                         hex("f0f1f2f3f4f5f6f7f8f9"), 42);
  EXPECT_EQ(okm, hex("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"));
}

TEST(Secret, HmacRfc4231TestCase2) {
  auto mac = hmac_sha256(bytes("Jefe"), bytes("what do ya want for nothing?"));
  auto want = hex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_TRUE(constant_time_equal(mac, want));
}

TEST(Secret, HmacWithEmptyKeyWorks) {
  // RFC 2104 allows it; OpenSSL needs a non-null pointer, which we supply.
  EXPECT_NO_THROW(hmac_sha256({}, bytes("x")));
}

TEST(Secret, ConstantTimeEqual) {
  EXPECT_TRUE(constant_time_equal(bytes("abc"), bytes("abc")));
  EXPECT_FALSE(constant_time_equal(bytes("abc"), bytes("abd")));
  EXPECT_FALSE(constant_time_equal(bytes("abc"), bytes("ab")));
  EXPECT_TRUE(constant_time_equal({}, {}));
}

TEST(Secret, RandomBytes) {
  EXPECT_EQ(random_bytes(0).size(), 0u);
  auto a = random_bytes(32);
  auto b = random_bytes(32);
  EXPECT_EQ(a.size(), 32u);
  EXPECT_NE(a, b);
}

TEST(Secret, GrantKeyIsHkdfOfTheSecretText) {
  const std::string secret = "abcdefghijklmnopqrstuvwxyz";
  auto expected = hkdf_sha256(bytes(secret), bytes("runsnack grant v1"), bytes("grant key"), 32);
  auto key = derive_grant_key(secret);
  EXPECT_TRUE(constant_time_equal(key, expected));
  EXPECT_EQ(derive_grant_key("ABCDEFGHIJKLMNOPQRSTUVWXYZ"), key);  // case does not matter
  EXPECT_NE(derive_grant_key("abcdefghijklmnopqrstuvwxy2"), key);
}

TEST(Secret, AuthProofIsHmacOverLabelAndBinding) {
  auto key = derive_grant_key("abcdefghijklmnopqrstuvwxyz");
  std::vector<std::uint8_t> binding(32, 0x42);
  auto message = bytes("runsnack auth v1");
  message.insert(message.end(), binding.begin(), binding.end());
  EXPECT_EQ(auth_proof(key, binding), hmac_sha256(key, message));
  std::vector<std::uint8_t> other(32, 0x43);
  EXPECT_NE(auth_proof(key, binding), auth_proof(key, other));
}

}  // namespace
}  // namespace runsnack
