#include "services/common/session_limiter.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace runsnack {
namespace {

TEST(SessionLimiter, CountsSlotsPerSessionAndRefusesOverTheLimit) {
  auto limiter = std::make_shared<SessionLimiter>();
  std::vector<SessionSlot> held;
  for (int i = 0; i < 3; ++i) {
    auto slot = limiter->acquire("a", 3, std::nullopt);
    ASSERT_TRUE(slot) << i;
    held.push_back(std::move(*slot));
  }
  EXPECT_FALSE(limiter->acquire("a", 3, std::nullopt));
  EXPECT_EQ(limiter->open("a"), 3);
  // Another session has its own count.
  auto other = limiter->acquire("b", 3, std::nullopt);
  ASSERT_TRUE(other);
  EXPECT_EQ(limiter->open("b"), 1);
  // A refusal leaves no entry behind for a session holding nothing.
  EXPECT_FALSE(limiter->acquire("c", 0, std::nullopt));
  EXPECT_EQ(limiter->sessions(), 2u);
  held.pop_back();
  EXPECT_EQ(limiter->open("a"), 2);
  EXPECT_TRUE(limiter->acquire("a", 3, std::nullopt));  // a slot was freed (and this one ends at once)
  EXPECT_EQ(limiter->open("a"), 2);
}

TEST(SessionLimiter, LastSlotRemovesTheSession) {
  auto limiter = std::make_shared<SessionLimiter>();
  {
    auto one = limiter->acquire("a", std::nullopt, 1000);
    auto two = limiter->acquire("a", std::nullopt, 1000);
    ASSERT_TRUE(one && two);
    EXPECT_EQ(limiter->open("a"), 2);
  }
  EXPECT_EQ(limiter->open("a"), 0);
  EXPECT_EQ(limiter->sessions(), 0u);
}

TEST(SessionLimiter, SlotsOfASessionShareOneBucket) {
  auto limiter = std::make_shared<SessionLimiter>();
  auto none = limiter->acquire("free", std::nullopt, std::nullopt);
  ASSERT_TRUE(none);
  EXPECT_EQ(none->bucket(), nullptr);
  auto one = limiter->acquire("a", std::nullopt, 1'000'000);
  auto two = limiter->acquire("a", std::nullopt, 1'000'000);
  auto other = limiter->acquire("b", std::nullopt, 1'000'000);
  ASSERT_TRUE(one && two && other);
  ASSERT_NE(one->bucket(), nullptr);
  EXPECT_EQ(one->bucket(), two->bucket());
  EXPECT_NE(one->bucket(), other->bucket());
  EXPECT_EQ(one->bucket()->rate(), 1'000'000);
  EXPECT_EQ(one->bucket()->burst(), default_burst(1'000'000));
}

TEST(SessionLimiter, MovedSlotCountsOnce) {
  auto limiter = std::make_shared<SessionLimiter>();
  std::optional<SessionSlot> slot = limiter->acquire("a", 1, std::nullopt);
  ASSERT_TRUE(slot);
  SessionSlot moved = std::move(*slot);
  slot.reset();
  EXPECT_EQ(limiter->open("a"), 1);
}

}  // namespace
}  // namespace runsnack
