#include "link/grant.hpp"

#include <gtest/gtest.h>

namespace runsnack {
namespace {

using namespace std::chrono_literals;

class GrantCheck : public ::testing::Test {
 protected:
  ManualClock clock{from_unix(1'800'000'000)};
  Grant grant;
};

TEST_F(GrantCheck, FreshGrantAccepts) { EXPECT_TRUE(check_grant(grant, clock.now(), 0, "peer-a").accepted); }

TEST_F(GrantCheck, ExpiryIsExclusive) {
  grant.expires = clock.now() + 10s;
  EXPECT_TRUE(check_grant(grant, clock.now(), 0, "a").accepted);
  clock.advance(10s);
  auto d = check_grant(grant, clock.now(), 0, "a");
  EXPECT_FALSE(d.accepted);
  EXPECT_EQ(d.code, errc::expired);
  ASSERT_TRUE(check_live_session(grant, clock.now()));
}

TEST_F(GrantCheck, UsesAndSessions) {
  grant.max_uses = 2;
  grant.uses = 2;
  EXPECT_EQ(check_grant(grant, clock.now(), 0, "a").code, errc::exhausted);
  grant.uses = 1;
  grant.max_sessions = 1;
  EXPECT_EQ(check_grant(grant, clock.now(), 1, "a").code, errc::exhausted);
  EXPECT_TRUE(check_grant(grant, clock.now(), 0, "a").accepted);
}

TEST_F(GrantCheck, BindingAndRevocation) {
  grant.bind_first = true;
  grant.bound_peer = "peer-a";
  EXPECT_TRUE(check_grant(grant, clock.now(), 0, "peer-a").accepted);
  EXPECT_EQ(check_grant(grant, clock.now(), 0, "peer-b").code, errc::refused);
  grant.revoked = true;
  EXPECT_EQ(check_grant(grant, clock.now(), 0, "peer-a").code, errc::revoked);
  EXPECT_FALSE(check_live_session(Grant{}, clock.now()));
  EXPECT_TRUE(check_live_session(grant, clock.now()));
}

TEST(ServiceList, ParsesAndAlwaysAllowsInfo) {
  auto s = parse_service_list("run,shell").value();
  EXPECT_EQ(s, (std::set<std::string>{"info", "run", "shell"}));
  EXPECT_EQ(parse_service_list("").value(), std::set<std::string>{"info"});
  auto bad = parse_service_list("run,bogus");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("bogus"), std::string::npos);
}

}  // namespace
}  // namespace runsnack
