#include "crypto/peer_id.hpp"

#include <gtest/gtest.h>

#include <unordered_set>

namespace runsnack {
namespace {

std::array<std::uint8_t, 32> from_hex(std::string_view hex) {
  std::array<std::uint8_t, 32> out{};
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<std::uint8_t>(std::stoi(std::string(hex.substr(2 * i, 2)), nullptr, 16));
  return out;
}

TEST(PeerId, KnownAnswerFromRawKey) {
  // base32(SHA-256(key))[:32], computed independently with Python's hashlib/base64.
  std::array<std::uint8_t, 32> zeros{};
  EXPECT_EQ(PeerId::from_raw_public_key(zeros).str(), "mzuhvlpymk6xo3epygfy5h4oeaejofef");
  // RFC 8032 section 7.1 test 1 public key.
  auto rfc = from_hex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a");
  EXPECT_EQ(PeerId::from_raw_public_key(rfc).str(), "eh7ddx5bksrgcytl7bkai36se4nxx3kl");
}

TEST(PeerId, ParseAcceptsCanonicalAndUpperCase) {
  auto id = PeerId::parse("eh7ddx5bksrgcytl7bkai36se4nxx3kl");
  ASSERT_TRUE(id);
  EXPECT_EQ(id->str(), "eh7ddx5bksrgcytl7bkai36se4nxx3kl");
  auto upper = PeerId::parse("EH7DDX5BKSRGCYTL7BKAI36SE4NXX3KL");
  ASSERT_TRUE(upper);
  EXPECT_EQ(*upper, *id);
}

TEST(PeerId, ParseErrorsNameTheProblem) {
  auto short_id = PeerId::parse("eh7ddx5bksrgcytl7bkai36se4nxx3k");
  ASSERT_FALSE(short_id);
  EXPECT_EQ(short_id.error().message, "peer id must be 32 base32 characters (got 31)");
  EXPECT_TRUE(short_id.error().is(errc::malformed));
  auto bad_char = PeerId::parse("eh7ddx5bksrgcytl7bkai36se4nxx3k1");  // '1' is not base32
  ASSERT_FALSE(bad_char);
  EXPECT_NE(bad_char.error().message.find("base32"), std::string::npos);
  EXPECT_FALSE(PeerId::parse(""));
}

TEST(PeerId, ValueSemantics) {
  auto a = *PeerId::parse("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
  auto b = *PeerId::parse("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
  EXPECT_LT(a, b);
  EXPECT_NE(a, b);
  std::unordered_set<PeerId> set{a, b, a};
  EXPECT_EQ(set.size(), 2u);
  EXPECT_TRUE(PeerId{}.empty());
  EXPECT_NE(PeerId{}, a);
}

}  // namespace
}  // namespace runsnack
