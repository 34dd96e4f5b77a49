#include "link/endpoint.hpp"

#include <gtest/gtest.h>

namespace runsnack {
namespace {

TEST(Endpoint, ParsesTheThreeHostForms) {
  auto v4 = parse_endpoint("192.0.2.7:7000");
  ASSERT_TRUE(v4) << v4.error().what();
  EXPECT_EQ(v4->host, "192.0.2.7");
  EXPECT_EQ(v4->port, 7000);
  EXPECT_EQ(v4->str(), "192.0.2.7:7000");

  auto v6 = parse_endpoint("[2001:0db8:0:0::1]:443");
  ASSERT_TRUE(v6) << v6.error().what();
  EXPECT_EQ(v6->host, "2001:db8::1");
  EXPECT_EQ(v6->str(), "[2001:db8::1]:443");

  auto name = parse_endpoint("Rdv.Example.org:65535");
  ASSERT_TRUE(name) << name.error().what();
  EXPECT_EQ(name->host, "rdv.example.org");
  EXPECT_EQ(name->port, 65535);
}

TEST(Endpoint, RefusesWithTheReason) {
  struct Case {
    const char* text;
    const char* reason;
  };
  for (const Case& c : {
           Case{"1.2.3.4:99999", "port must be 1-65535"},
           Case{"1.2.3.4:0", "port must be 1-65535"},
           Case{"1.2.3.4:", "port must be 1-65535"},
           Case{"1.2.3.4", "missing port"},
           Case{"[::1]", "missing port"},
           Case{"1.2.3.256:80", "not a valid IPv4 address or host name"},
           Case{"01.2.3.4:80", "not a valid IPv4 address or host name"},
           Case{"user@host:80", "user info is not allowed"},
           Case{"ho_st:80", "only letters, digits"},
           Case{"-host:80", "starts or ends with '-'"},
           Case{"a..b:80", "empty label"},
           Case{":80", "missing host"},
           Case{"[v1.x]:80", "unsupported address form"},
           Case{"[::1:80", "expected HOST:PORT"},
           Case{"host:80/path", "expected HOST:PORT"},
       }) {
    auto r = parse_endpoint(c.text);
    ASSERT_FALSE(r) << c.text;
    EXPECT_NE(r.error().message.find(c.reason), std::string::npos) << c.text << " -> " << r.error().message;
    EXPECT_NE(r.error().message.find(std::string("'") + c.text + "'"), std::string::npos) << r.error().message;
  }
}

}  // namespace
}  // namespace runsnack
