#include "core/base32.hpp"

#include <gtest/gtest.h>

namespace runsnack {
namespace {

std::vector<std::uint8_t> bytes(std::string_view s) { return {s.begin(), s.end()}; }

// Known answers from RFC 4648 section 10, lower-cased, without padding.
TEST(Base32, Rfc4648Vectors) {
  EXPECT_EQ(base32::encode(bytes("")), "");
  EXPECT_EQ(base32::encode(bytes("f")), "my");
  EXPECT_EQ(base32::encode(bytes("fo")), "mzxq");
  EXPECT_EQ(base32::encode(bytes("foo")), "mzxw6");
  EXPECT_EQ(base32::encode(bytes("foob")), "mzxw6yq");
  EXPECT_EQ(base32::encode(bytes("fooba")), "mzxw6ytb");
  EXPECT_EQ(base32::encode(bytes("foobar")), "mzxw6ytboi");
}

TEST(Base32, RoundTripAndCase) {
  auto d = base32::decode("MZXW6YTBOI");
  ASSERT_TRUE(d);
  EXPECT_EQ(*d, bytes("foobar"));
}

TEST(Base32, RejectsBadInput) {
  EXPECT_FALSE(base32::decode("mzx1"));       // '1' is not in the alphabet
  EXPECT_FALSE(base32::decode("mz="));        // no padding
  EXPECT_FALSE(base32::decode("mz"));         // ok length, but "mz" -> 'f' needs trailing zero bits: "my"
  EXPECT_TRUE(base32::decode("my"));
  EXPECT_FALSE(base32::decode("m"));          // truncated group
}

}  // namespace
}  // namespace runsnack
