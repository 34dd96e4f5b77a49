#include "core/duration.hpp"

#include <gtest/gtest.h>

namespace runsnack {
namespace {

TEST(Duration, Parses) {
  EXPECT_EQ(parse_duration("90s").value().count(), 90);
  EXPECT_EQ(parse_duration("2h").value().count(), 7200);
  EXPECT_EQ(parse_duration("1h30m").value().count(), 5400);
  EXPECT_EQ(parse_duration("1d").value().count(), 86400);
}

TEST(Duration, RejectsWithReason) {
  auto r = parse_duration("2");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("missing unit"), std::string::npos);
  EXPECT_FALSE(parse_duration(""));
  EXPECT_FALSE(parse_duration("h"));
  EXPECT_FALSE(parse_duration("5x"));
  EXPECT_FALSE(parse_duration("0s"));
  EXPECT_FALSE(parse_duration("99999999999d"));
}

TEST(Duration, Formats) {
  EXPECT_EQ(format_duration(std::chrono::seconds(5400)), "1h30m");
  EXPECT_EQ(format_duration(std::chrono::seconds(0)), "0s");
  EXPECT_EQ(format_duration(std::chrono::seconds(86461)), "1d1m1s");
}

}  // namespace
}  // namespace runsnack
