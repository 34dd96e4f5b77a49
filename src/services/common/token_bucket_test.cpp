#include "services/common/token_bucket.hpp"

#include <gtest/gtest.h>

namespace runsnack {
namespace {

using namespace std::chrono_literals;
using Clock = TokenBucket::Clock;

TEST(TokenBucket, BurstIsFreeThenRateHolds) {
  Clock::time_point t0{};
  TokenBucket bucket(1000, 100, t0);
  EXPECT_EQ(bucket.reserve(100, t0), Clock::duration::zero());
  // 100 more bytes at 1000 B/s: 100 ms of debt.
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(bucket.reserve(100, t0)), 100ms);
  // Debt is shared: the next caller waits behind it.
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(bucket.reserve(100, t0)), 200ms);
}

TEST(TokenBucket, SimulatedTransferMatchesRate) {
  // A sender that always waits as told sends rate * time bytes, within one burst.
  Clock::time_point now{};
  const std::int64_t rate = 1'250'000;
  TokenBucket bucket(rate, default_burst(rate), now);
  std::int64_t sent = 0;
  const auto end = now + 5s;
  while (now < end) {
    now += bucket.reserve(bucket.burst(), now);
    sent += bucket.burst();
  }
  double expected = 5.0 * rate;
  EXPECT_NEAR(static_cast<double>(sent), expected, expected * 0.02);
}

TEST(TokenBucket, IdleRefillIsCappedAtBurst) {
  Clock::time_point t0{};
  TokenBucket bucket(1000, 100, t0);
  (void)bucket.reserve(100, t0);
  // An hour idle buys only one burst.
  EXPECT_EQ(bucket.reserve(100, t0 + 1h), Clock::duration::zero());
  EXPECT_GT(bucket.reserve(1, t0 + 1h), Clock::duration::zero());
}

TEST(TokenBucket, DefaultBurstBounds) {
  EXPECT_EQ(default_burst(1), 4096);
  EXPECT_EQ(default_burst(1'000'000), 20'000);
  EXPECT_EQ(default_burst(1'000'000'000), 256 * 1024);
}

}  // namespace
}  // namespace runsnack
