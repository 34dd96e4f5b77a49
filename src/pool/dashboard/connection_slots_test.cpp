// The dashboard's connection slots: one address cannot hold more than its share.
#include "pool/dashboard/connection_slots.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace runsnack::pool::dashboard {
namespace {

TEST(ConnectionSlots, AnAddressAtItsCapIsRefusedAndOthersGetIn) {
  ConnectionSlots slots(3, 64);
  for (int i = 0; i < 3; ++i) {
    auto t = slots.take("192.0.2.66");
    ASSERT_TRUE(t.slot);
    EXPECT_FALSE(t.evict);
  }
  auto fourth = slots.take("192.0.2.66");
  EXPECT_FALSE(fourth.slot);
  EXPECT_FALSE(fourth.evict) << "an address at its cap must not push out its own requests";
  EXPECT_EQ(slots.held("192.0.2.66"), 3u);
  auto other = slots.take("192.0.2.7");
  EXPECT_TRUE(other.slot);
  EXPECT_FALSE(other.evict);
  EXPECT_EQ(slots.held(), 4u);
}

TEST(ConnectionSlots, WhenAllAreTakenTheAddressWithMostGivesUpItsOldest) {
  ConnectionSlots slots(8, 4);
  auto a1 = slots.take("198.51.100.1");
  slots.take("198.51.100.1");
  slots.take("198.51.100.1");
  slots.take("198.51.100.2");
  auto newcomer = slots.take("198.51.100.3");
  ASSERT_TRUE(newcomer.slot);
  ASSERT_TRUE(newcomer.evict);
  EXPECT_EQ(*newcomer.evict, *a1.slot);
  EXPECT_FALSE(slots.holds(*a1.slot));
  EXPECT_EQ(slots.held(), 4u);
  EXPECT_EQ(slots.held("198.51.100.1"), 2u);
  // 2, 1, 1 and a newcomer from .2 (which would then hold 2): no swap between equals, refused.
  auto again = slots.take("198.51.100.2");
  EXPECT_FALSE(again.slot);
  EXPECT_FALSE(again.evict);
}

TEST(ConnectionSlots, AWebSocketIsNeverEvicted) {
  ConnectionSlots slots(8, 3);
  auto ws1 = slots.take("198.51.100.1");
  auto ws2 = slots.take("198.51.100.1");
  auto pending = slots.take("198.51.100.1");
  slots.keep(*ws1.slot);
  slots.keep(*ws2.slot);
  auto newcomer = slots.take("198.51.100.9");
  ASSERT_TRUE(newcomer.evict);
  EXPECT_EQ(*newcomer.evict, *pending.slot) << "the oldest that is not a WebSocket goes";
  // Now only WebSockets and the newcomer: nothing may go, so the next one is refused.
  EXPECT_FALSE(slots.take("198.51.100.10").slot);
  EXPECT_TRUE(slots.holds(*ws1.slot));
  EXPECT_TRUE(slots.holds(*ws2.slot));
}

TEST(ConnectionSlots, OneAddressHoldsAtMostItsShareWhateverItOpens) {
  // The dashboard's defaults: 64 slots, 16 per address; an attacker at one address opens 1000.
  ConnectionSlots slots(16, 64);
  int refused = 0;
  for (int i = 0; i < 1000; ++i)
    if (!slots.take("203.0.113.5").slot) ++refused;
  EXPECT_EQ(slots.held("203.0.113.5"), 16u);
  EXPECT_EQ(refused, 1000 - 16);
  // 48 other addresses all get in, none evicted.
  for (int i = 0; i < 48; ++i) {
    auto t = slots.take("198.51.100." + std::to_string(i));
    EXPECT_TRUE(t.slot);
    EXPECT_FALSE(t.evict);
  }
  // Full: the next address takes the attacker's oldest.
  auto next = slots.take("192.0.2.1");
  EXPECT_TRUE(next.slot);
  EXPECT_TRUE(next.evict);
  EXPECT_EQ(slots.held("203.0.113.5"), 15u);
}

TEST(ConnectionSlots, ReleaseFreesTheSlotAndIgnoresUnknownOnes) {
  ConnectionSlots slots(1, 4);
  auto t = slots.take("192.0.2.1");
  EXPECT_FALSE(slots.take("192.0.2.1").slot);
  slots.release(*t.slot);
  slots.release(*t.slot);
  slots.release(12345);
  EXPECT_EQ(slots.held(), 0u);
  EXPECT_TRUE(slots.take("192.0.2.1").slot);
}

}  // namespace
}  // namespace runsnack::pool::dashboard
