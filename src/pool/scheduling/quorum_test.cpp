// Comparing replicas bit for bit or within a tolerance, and finding the majority.
#include "pool/scheduling/quorum.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace runsnack::pool::scheduling {
namespace {

TEST(Quorum, BitExactMajority) {
  std::vector<std::string> r = {"abc", "abd", "abc"};
  auto q = quorum(r.size(), 2, [&](std::size_t i, std::size_t j) { return agree_exact(r[i], r[j]); });
  ASSERT_TRUE(q.decided);
  EXPECT_EQ(r[q.winner], "abc");
  EXPECT_EQ(q.agreeing, (std::vector<std::size_t>{0, 2}));
  EXPECT_EQ(q.disagreeing, (std::vector<std::size_t>{1}));
}

TEST(Quorum, TwoThatDisagreeAreUndecided) {
  std::vector<std::string> r = {"x", "y"};
  auto q = quorum(r.size(), 2, [&](std::size_t i, std::size_t j) { return agree_exact(r[i], r[j]); });
  EXPECT_FALSE(q.decided);
  EXPECT_FALSE(quorum(0, 1, [](std::size_t, std::size_t) { return true; }).decided);
}

TEST(Quorum, FloatingPointWithinTheDeclaredTolerance) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> a = {1.0, 1000.0, nan}, b = {1.0 + 1e-7, 1000.0 + 1e-4, nan}, c = {1.0, 1001.0, nan};
  Tolerance t{1e-6, 1e-6};
  EXPECT_TRUE(agree_within(a, b, t));
  EXPECT_FALSE(agree_within(a, c, t));
  EXPECT_FALSE(agree_within(a, std::vector<double>{1.0, 1000.0}, t));
  EXPECT_FALSE(agree_within(std::vector<double>{nan}, std::vector<double>{0.0}, t));
  EXPECT_TRUE(agree_within(std::vector<double>{INFINITY}, std::vector<double>{INFINITY}, {}));
  EXPECT_FALSE(agree_within(a, b, {}));  // no tolerance declared: bit for bit
  std::vector<std::vector<double>> r = {a, c, b};
  auto q = quorum(r.size(), 2, [&](std::size_t i, std::size_t j) { return agree_within(r[i], r[j], t); });
  ASSERT_TRUE(q.decided);
  EXPECT_EQ(q.disagreeing, (std::vector<std::size_t>{1}));
}

}  // namespace
}  // namespace runsnack::pool::scheduling
