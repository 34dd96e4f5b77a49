#include "core/address_key.hpp"

#include <gtest/gtest.h>

namespace runsnack {
namespace {

TEST(AddressKey, Ipv4OrAnIpv6Slash64) {
  namespace ip = boost::asio::ip;
  EXPECT_EQ(address_key(ip::make_address("192.0.2.7")), "192.0.2.7");
  EXPECT_EQ(address_key(ip::make_address("::ffff:192.0.2.7")), "192.0.2.7");
  // An IPv6 /64 is one subscriber: all its addresses share a key.
  EXPECT_EQ(address_key(ip::make_address("2001:db8:1:2:a:b:c:d")), "2001:db8:1:2::/64");
  EXPECT_EQ(address_key(ip::make_address("2001:db8:1:2::99")), "2001:db8:1:2::/64");
  EXPECT_EQ(address_key(ip::make_address("2001:db8:1:2::1")), address_key(ip::make_address("2001:db8:1:2:ffff::9")));
}

TEST(AddressKey, FromText) {
  EXPECT_EQ(address_key("2001:db8:1:2:aaaa::1"), "2001:db8:1:2::/64");
  EXPECT_EQ(address_key("2001:db8:1:2:ffff:ffff:ffff:ffff"), "2001:db8:1:2::/64");
  EXPECT_EQ(address_key("::ffff:192.0.2.5"), "192.0.2.5");
  EXPECT_EQ(address_key("192.0.2.5"), "192.0.2.5");
  EXPECT_EQ(address_key("not an address"), "not an address");
}

}  // namespace
}  // namespace runsnack
