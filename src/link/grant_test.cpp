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

TEST_F(GrantCheck, MaxUsesCountsConsumersNotConnections) {
  grant.max_uses = 2;
  grant.consumers = 1;
  grant.connections = 40;  // however often they came
  EXPECT_TRUE(check_new_consumer(grant).accepted);
  EXPECT_EQ(uses_left(grant), 1);
  EXPECT_EQ(grant_terms(grant, clock.now())["state"], "active");
  grant.consumers = 2;
  EXPECT_TRUE(check_grant(grant, clock.now(), 0, "a").accepted);  // a known consumer comes back
  auto d = check_new_consumer(grant);
  EXPECT_FALSE(d.accepted);
  EXPECT_EQ(d.code, errc::exhausted);
  EXPECT_EQ(d.reason, "this link is for 2 consumers (2 keys) and 2 others have used it: ask the provider for a new link");
  auto terms = grant_terms(grant, clock.now());
  EXPECT_EQ(terms["state"], "full");
  EXPECT_EQ(terms["uses"], 2);
  EXPECT_EQ(terms["uses_left"], 0);
  EXPECT_EQ(terms["connections"], 40);
  grant.max_uses = 1;
  grant.consumers = 1;
  EXPECT_EQ(check_new_consumer(grant).reason,
            "this link is for 1 consumer (one key) and another has used it: ask the provider for a new link");
  grant.max_uses.reset();
  grant.consumers = kMaxUsesLimit;
  EXPECT_TRUE(check_new_consumer(grant).accepted);
  EXPECT_EQ(uses_left(grant), std::nullopt);
  EXPECT_TRUE(grant_terms(grant, clock.now())["uses_left"].is_null());
}

TEST_F(GrantCheck, Sessions) {
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
