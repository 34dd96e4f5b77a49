#include "pool/scheduling/network.hpp"

#include <gtest/gtest.h>

namespace runsnack::pool::scheduling {
namespace {

TEST(Network, Ipv4IsItsSlash24) {
  EXPECT_EQ(network_of("203.0.113.7:4000"), "203.0.113.0/24");
  EXPECT_EQ(network_of("203.0.113.250:1"), "203.0.113.0/24");
  EXPECT_NE(network_of("127.0.0.2:5"), network_of("127.0.1.2:5"));
  EXPECT_EQ(network_of("10.1.2.3"), "10.1.2.0/24");
}

TEST(Network, Ipv6IsItsSlash48AndMappedV4IsV4) {
  EXPECT_EQ(network_of("[2001:db8:7:1::5]:443"), "2001:db8:7::/48");
  EXPECT_EQ(network_of("[2001:db8:7:ffff::1]:1"), network_of("[2001:db8:7::2]:2"));
  EXPECT_NE(network_of("[2001:db8:7::1]:1"), network_of("[2001:db8:8::1]:1"));
  EXPECT_EQ(network_of("[::ffff:198.51.100.9]:80"), "198.51.100.0/24");
}

TEST(Network, WhatIsNotAnAddressIsUnknown) {
  EXPECT_EQ(network_of("relay 198.51.100.9:80"), kUnknownNetwork);
  EXPECT_EQ(network_of(""), kUnknownNetwork);
  EXPECT_EQ(network_of("[::1"), kUnknownNetwork);
  EXPECT_EQ(network_of("example.org:80"), kUnknownNetwork);
}

TEST(Network, CopyGoesToAnotherNetworkWhenOneIsFree) {
  const std::string a = "10.0.0.0/24", b = "10.0.1.0/24", c = "10.0.2.0/24";
  // Another copy runs on a: a device on c is free, so the one on a leaves it.
  EXPECT_TRUE(leave_copy_for_another_network(a, {a}, {a, c}));
  // Only devices on the copies' networks are free: take it (a different PeerId is still something).
  EXPECT_FALSE(leave_copy_for_another_network(a, {a, b}, {a, b}));
  EXPECT_FALSE(leave_copy_for_another_network(a, {a}, {}));
  // Its own network is not among the copies': take it whatever else is free.
  EXPECT_FALSE(leave_copy_for_another_network(c, {a, b}, {a, b, c}));
}

TEST(Network, DistinctCount) {
  EXPECT_EQ(distinct_networks({}), 0u);
  EXPECT_EQ(distinct_networks({"a", "b", "a"}), 2u);
}

}  // namespace
}  // namespace runsnack::pool::scheduling
