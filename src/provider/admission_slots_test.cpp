// Pending-handshake slots: one address cannot hold more than its share.
#include "provider/admission_slots.hpp"

#include <gtest/gtest.h>

namespace runsnack {
namespace {

TEST(AdmissionSlots, AnAddressAtItsCapGivesUpItsOldest) {
  AdmissionSlots slots(3, 100);
  std::vector<std::uint64_t> held;
  for (int i = 0; i < 3; ++i) {
    auto t = slots.take("192.0.2.66");
    EXPECT_FALSE(t.evict);
    held.push_back(t.slot);
  }
  auto fourth = slots.take("192.0.2.66");
  ASSERT_TRUE(fourth.evict);
  EXPECT_EQ(*fourth.evict, held[0]);
  EXPECT_EQ(slots.pending("192.0.2.66"), 3u);
  // Another address is not touched.
  auto other = slots.take("192.0.2.7");
  EXPECT_FALSE(other.evict);
  EXPECT_EQ(slots.pending(), 4u);
}

TEST(AdmissionSlots, AtTheTotalTheAddressWithMostGivesWay) {
  AdmissionSlots slots(8, 4);
  auto a1 = slots.take("198.51.100.1");
  slots.take("198.51.100.1");
  slots.take("198.51.100.1");
  slots.take("198.51.100.2");
  auto newcomer = slots.take("198.51.100.3");
  ASSERT_TRUE(newcomer.evict);
  EXPECT_EQ(*newcomer.evict, a1.slot);
  EXPECT_EQ(slots.pending(), 4u);
  EXPECT_EQ(slots.pending("198.51.100.1"), 2u);
}

TEST(AdmissionSlots, ReleaseFreesTheSlotAndIgnoresUnknownOnes) {
  AdmissionSlots slots(1, 10);
  auto t = slots.take("203.0.113.1");
  slots.release(t.slot);
  slots.release(t.slot);
  slots.release(12345);
  EXPECT_EQ(slots.pending(), 0u);
  EXPECT_FALSE(slots.take("203.0.113.1").evict);
}

}  // namespace
}  // namespace runsnack
