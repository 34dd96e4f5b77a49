// The relay's budgets over time, stepped without sockets: per provider key,
// per address (IPv4, IPv6 /64), windows, the operator's key list, and the
// tables' bound.
#include "rendezvous/relay_budget.hpp"

#include <gtest/gtest.h>

#include <limits>

namespace runsnack::rdv {
namespace {

using namespace std::chrono_literals;
using Time = RelayBudgets::Time;

const std::string kAlice(32, 'a');
const std::string kMallory(32, 'm');

RelayBudgetLimits small() {
  RelayBudgetLimits l;
  l.per_key = 1000;
  l.per_address = 3000;
  l.window = 3600s;
  l.max_tracked = 8;
  return l;
}

TEST(RelayBudget, AKeysPairsShareItsBudgetUntilTheWindowEnds) {
  RelayBudgets b(small());
  Time now{};
  EXPECT_EQ(b.remaining(kAlice, "192.0.2.1", "198.51.100.1", now), 1000u);
  b.charge(kAlice, "192.0.2.1", "198.51.100.1", 600, now);
  // A second pair of the same key, from other addresses, has what is left.
  EXPECT_EQ(b.remaining(kAlice, "192.0.2.7", "198.51.100.7", now + 1s), 400u);
  b.charge(kAlice, "192.0.2.7", "198.51.100.7", 400, now + 1s);
  EXPECT_EQ(b.remaining(kAlice, "192.0.2.1", "198.51.100.1", now + 2s), 0u);
  auto why = b.spent(kAlice, "192.0.2.1", "198.51.100.1", now + 2s);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("provider " + kAlice), std::string::npos) << *why;
  EXPECT_NE(why->find("1000 bytes per 1h"), std::string::npos) << *why;
  EXPECT_NE(why->find("renews in 1h"), std::string::npos) << *why;
  auto refused = b.refuse(kAlice, "203.0.113.9", std::nullopt, now + 10min);
  ASSERT_TRUE(refused);
  EXPECT_NE(refused->find("renews in 50m"), std::string::npos) << *refused;
  // Another key is not charged for Alice's bytes.
  EXPECT_FALSE(b.refuse(kMallory, "203.0.113.9", std::nullopt, now + 2s));
  // The window ends an hour after the key's first byte.
  EXPECT_EQ(b.remaining(kAlice, "192.0.2.1", "198.51.100.1", now + 3600s), 1000u);
  EXPECT_FALSE(b.refuse(kAlice, "192.0.2.1", std::nullopt, now + 3600s));
}

TEST(RelayBudget, ManyKeysFromOneAddressShareTheAddresssBudget) {
  RelayBudgets b(small());
  Time now{};
  // Keys made on the spot, each within its own budget, all from 192.0.2.1.
  for (int i = 0; i < 3; ++i) {
    std::string key(32, static_cast<char>('b' + i));
    b.charge(key, "192.0.2.1", "192.0.2.1", 1000, now);  // both sides on one address: charged once
  }
  std::string fourth(32, 'z');
  EXPECT_EQ(b.remaining(fourth, "192.0.2.1", "198.51.100.1", now), 0u);
  auto why = b.refuse(fourth, "192.0.2.1", std::nullopt, now);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("address 192.0.2.1"), std::string::npos) << *why;
  // The other side's address counts once both are known.
  EXPECT_FALSE(b.refuse(fourth, "198.51.100.1", std::nullopt, now));
  EXPECT_TRUE(b.refuse(fourth, "198.51.100.1", std::string("192.0.2.1"), now));
}

TEST(RelayBudget, AnIpv6AddressIsItsSlash64) {
  // (address_key's own cases: core/address_key_test.cpp)
  RelayBudgets b(small());
  Time now{};
  b.charge(kAlice, "2001:db8:1:2::1", "2001:db8:1:2::2", 500, now);
  b.charge(kMallory, "2001:db8:1:2::3", "2001:db8:1:2::4", 1000, now);
  b.charge(std::string(32, 'c'), "2001:db8:1:2::5", "2001:db8:1:2::6", 1000, now);
  b.charge(std::string(32, 'd'), "2001:db8:1:2::7", "2001:db8:1:2::8", 500, now);
  // 3000 bytes from one /64, spread over eight addresses and four keys.
  EXPECT_TRUE(b.refuse(std::string(32, 'e'), "2001:db8:1:2::9", std::nullopt, now));
  EXPECT_FALSE(b.refuse(std::string(32, 'e'), "2001:db8:1:3::9", std::nullopt, now));
}

TEST(RelayBudget, OnlyListedKeysWhenTheOperatorListsThem) {
  RelayBudgets open(small());
  EXPECT_FALSE(open.restricted());
  EXPECT_FALSE(open.refuse(kMallory, "192.0.2.1", std::nullopt, Time{}));
  RelayBudgets listed(small(), {kAlice});
  EXPECT_TRUE(listed.restricted());
  EXPECT_FALSE(listed.refuse(kAlice, "192.0.2.1", std::nullopt, Time{}));
  auto why = listed.refuse(kMallory, "192.0.2.1", std::nullopt, Time{});
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("only for the provider keys its operator lists"), std::string::npos) << *why;
  EXPECT_NE(why->find(kMallory), std::string::npos) << *why;
}

TEST(RelayBudget, ZeroIsNoLimit) {
  RelayBudgetLimits l = small();
  l.per_key = 0;
  l.per_address = 0;
  RelayBudgets b(l);
  b.charge(kAlice, "192.0.2.1", "192.0.2.2", std::numeric_limits<std::uint64_t>::max() / 2, Time{});
  EXPECT_EQ(b.remaining(kAlice, "192.0.2.1", "192.0.2.2", Time{}), std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(b.tracked_keys(), 0u);
  EXPECT_EQ(b.tracked_addresses(), 0u);
}

TEST(RelayBudget, TablesAreBoundedAndForgetTheLeastRecentlyCharged) {
  BudgetTable t(100, 3600s, 4);
  Time now{};
  for (int i = 0; i < 4; ++i) t.charge("k" + std::to_string(i), 100, now + std::chrono::seconds(i));
  t.charge("k0", 0, now + 10s);  // k0 is the most recent now; k1 the least
  t.charge("k9", 1, now + 11s);
  EXPECT_EQ(t.size(), 4u);
  EXPECT_EQ(t.remaining("k0", now + 12s), 0u);    // kept
  EXPECT_EQ(t.remaining("k1", now + 12s), 100u);  // forgotten
  for (int i = 0; i < 100000; ++i) t.charge("flood" + std::to_string(i), 1, now + 20s);
  EXPECT_EQ(t.size(), 4u);
  // Entries whose window has ended go at the sweep.
  t.expire(now + 20s + 3600s);
  EXPECT_EQ(t.size(), 0u);
}

TEST(RelayBudget, BytesText) {
  EXPECT_EQ(bytes_text(100), "100 bytes");
  EXPECT_EQ(bytes_text(1536), "1.5 KiB");
  EXPECT_EQ(bytes_text(2ull << 30), "2 GiB");
  EXPECT_EQ(bytes_text(2 * 1024 * 1024), "2 MiB");
}

}  // namespace
}  // namespace runsnack::rdv
