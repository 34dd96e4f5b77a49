#include "pool/dashboard/http_address.hpp"

#include <gtest/gtest.h>

namespace runsnack::pool::dashboard {
namespace {

TEST(HttpAddress, ParsesAddressesAndPorts) {
  auto a = parse_http_address("127.0.0.1:8080");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->address().to_string(), "127.0.0.1");
  EXPECT_EQ(a->port(), 8080);
  auto b = parse_http_address("[::1]:9000");
  ASSERT_TRUE(b);
  EXPECT_TRUE(b->address().is_v6());
  EXPECT_EQ(b->port(), 9000);
  auto c = parse_http_address("8081");
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->address().is_loopback());
  auto d = parse_http_address("localhost:0");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->address().to_string(), "127.0.0.1");
}

TEST(HttpAddress, RefusesBadInputWithAMessage) {
  for (const char* text : {"", "example.com:80", "127.0.0.1:99999", "127.0.0.1:", "::1:80", "1.2.3.4:8x"}) {
    auto r = parse_http_address(text);
    ASSERT_FALSE(r) << text;
    EXPECT_NE(r.error().message.find("bad --http"), std::string::npos) << text;
  }
}

TEST(HttpAddress, UrlShowsLoopbackForUnspecified) {
  EXPECT_EQ(http_url(*parse_http_address("0.0.0.0:8080")), "http://127.0.0.1:8080/");
  EXPECT_EQ(http_url(*parse_http_address("[::]:80")), "http://[::1]:80/");
  EXPECT_EQ(http_url(*parse_http_address("10.1.2.3:81")), "http://10.1.2.3:81/");
}

}  // namespace
}  // namespace runsnack::pool::dashboard
