// The admission decision with a real (in-memory) store and no sockets.
#include "provider/admission.hpp"

#include "crypto/identity.hpp"
#include "crypto/secret.hpp"
#include "link/link.hpp"
#include "store/database.hpp"

#include <gtest/gtest.h>

namespace runsnack {
namespace {

using namespace std::chrono_literals;

class AdmissionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grant.id = new_grant_id();
    grant.key = derive_grant_key(secret);
    grant.created = clock.now();
    ASSERT_TRUE(grants.create(grant));
  }

  AdmissionRequest request(const std::string& secret_text, const PeerId& who) {
    AdmissionRequest r;
    r.consumer = who;
    r.address = "127.0.0.1:5000";
    r.hello.grant_id = grant.id;
    r.hello.proof = auth_proof(derive_grant_key(secret_text), binding);
    r.channel_binding = binding;
    return r;
  }

  std::vector<AuditEvent> audit_events() { return audit.query(std::nullopt, 100).value(); }

  ManualClock clock{from_unix(1'800'000'000)};
  Database db = Database::open(":memory:").value();
  GrantStore grants{db, clock};
  AuditLog audit{db};
  std::int64_t live = 0;
  LiveSessionCounts elsewhere;  // sessions on other grants: from this address and in all
  SessionLimits limits{6, 3};
  Admitter admitter{grants, audit, clock,
                    [this](const std::string&) {
                      return LiveSessionCounts{live, elsewhere.from_address, elsewhere.total + live};
                    },
                    limits};
  std::string secret = new_secret();
  std::array<std::uint8_t, 32> binding{1, 2, 3};
  Grant grant;
  PeerId alice = Identity::generate().value().peer_id();
  PeerId bob = Identity::generate().value().peer_id();
};

TEST_F(AdmissionTest, AcceptsTheRightProofAndCountsTheUse) {
  auto a = admitter.admit(request(secret, alice), "s1");
  ASSERT_TRUE(a.reply.ok) << a.reply.reason;
  EXPECT_EQ(a.reply.session_id, "s1");
  EXPECT_EQ(a.grant->connections, 1);
  EXPECT_EQ(a.grant->consumers, 1);
  auto events = audit_events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].decision, "accept");
  EXPECT_EQ(events[0].peer, alice.str());
}

TEST_F(AdmissionTest, WrongSecretIsRefusedAndNotCounted) {
  auto a = admitter.admit(request(new_secret(), alice), "s1");
  EXPECT_FALSE(a.reply.ok);
  EXPECT_EQ(a.reply.code, errc::auth_failed);
  EXPECT_EQ(grants.find(grant.id).value()->connections, 0);
  EXPECT_EQ(audit_events().at(0).decision, "refuse");
}

TEST_F(AdmissionTest, ProofFromAnotherChannelIsRefused) {
  auto r = request(secret, alice);
  std::array<std::uint8_t, 32> other{9, 9, 9};
  r.channel_binding = other;  // the same proof replayed on another TLS connection
  EXPECT_EQ(admitter.admit(r, "s1").reply.code, errc::auth_failed);
}

TEST_F(AdmissionTest, UnknownGrant) {
  auto r = request(secret, alice);
  r.hello.grant_id = new_grant_id();
  EXPECT_EQ(admitter.admit(r, "s1").reply.code, errc::not_found);
}

TEST_F(AdmissionTest, PolicyRefusalsOnlyAfterAValidProof) {
  ASSERT_TRUE(grants.revoke(grant.id).value());
  // Without the secret nobody learns the link was revoked.
  EXPECT_EQ(admitter.admit(request(new_secret(), alice), "s1").reply.code, errc::auth_failed);
  EXPECT_EQ(admitter.admit(request(secret, alice), "s2").reply.code, errc::revoked);
}

TEST_F(AdmissionTest, SessionsAndBinding) {
  Grant g2;
  g2.id = new_grant_id();
  g2.key = derive_grant_key(secret);
  g2.created = clock.now();
  g2.max_sessions = 1;
  g2.bind_first = true;
  ASSERT_TRUE(grants.create(g2));
  auto r = request(secret, alice);
  r.hello.grant_id = g2.id;
  ASSERT_TRUE(admitter.admit(r, "s1").reply.ok);
  live = 1;
  EXPECT_EQ(admitter.admit(r, "s2").reply.code, errc::exhausted);
  live = 0;
  auto rb = request(secret, bob);
  rb.hello.grant_id = g2.id;
  EXPECT_EQ(admitter.admit(rb, "s3").reply.code, errc::refused);
  EXPECT_TRUE(admitter.admit(r, "s4").reply.ok);
}

TEST_F(AdmissionTest, Expiry) {
  Grant g3;
  g3.id = new_grant_id();
  g3.key = derive_grant_key(secret);
  g3.created = clock.now();
  g3.expires = clock.now() + 10s;
  ASSERT_TRUE(grants.create(g3));
  auto r = request(secret, alice);
  r.hello.grant_id = g3.id;
  EXPECT_TRUE(admitter.admit(r, "s1").reply.ok);
  clock.advance(11s);
  EXPECT_EQ(admitter.admit(r, "s2").reply.code, errc::expired);
}

TEST_F(AdmissionTest, MaxUsesCountsConsumersAndTellsTheNextWhatToDo) {
  Grant g;
  g.id = new_grant_id();
  g.key = derive_grant_key(secret);
  g.created = clock.now();
  g.max_uses = 2;
  ASSERT_TRUE(grants.create(g));
  PeerId carol = Identity::generate().value().peer_id();
  auto on_g = [&](const PeerId& who) {
    auto r = request(secret, who);
    r.hello.grant_id = g.id;
    return admitter.admit(r, "s");
  };
  for (int i = 0; i < 5; ++i) {  // info, run, reconnects: as often as they like
    ASSERT_TRUE(on_g(alice).reply.ok);
    ASSERT_TRUE(on_g(bob).reply.ok);
  }
  auto refused = on_g(carol);
  EXPECT_FALSE(refused.reply.ok);
  EXPECT_EQ(refused.reply.code, errc::exhausted);
  EXPECT_EQ(refused.reply.reason,
            "this link is for 2 consumers (2 keys) and 2 others have used it: ask the provider for a new link");
  auto again = on_g(alice);
  ASSERT_TRUE(again.reply.ok);
  EXPECT_EQ(again.grant->consumers, 2);
  EXPECT_EQ(again.grant->connections, 11);
  auto events = audit_events();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().detail.value("connections", 0), 11);
  EXPECT_EQ(events.back().detail.value("consumers", 0), 2);
  std::size_t refusals = 0;
  for (const auto& e : events) refusals += e.decision == "refuse" && e.peer == carol.str() ? 1 : 0;
  EXPECT_EQ(refusals, 1u);
}

TEST_F(AdmissionTest, ProviderWideAndPerAddressSessionLimits) {
  // Another link's sessions from this address use up the address's 3; the use is not counted.
  elsewhere = {0, 3, 3};
  auto a = admitter.admit(request(secret, alice), "s1");
  EXPECT_FALSE(a.reply.ok);
  EXPECT_EQ(a.reply.code, errc::exhausted);
  EXPECT_NE(a.reply.reason.find("your address already has 3 sessions"), std::string::npos) << a.reply.reason;
  EXPECT_EQ(grants.find(grant.id).value()->connections, 0);

  elsewhere = {0, 2, 2};  // room again
  EXPECT_TRUE(admitter.admit(request(secret, alice), "s2").reply.ok);

  elsewhere = {0, 0, 6};  // the provider's 6 in all, none from this address
  auto b = admitter.admit(request(secret, bob), "s3");
  EXPECT_FALSE(b.reply.ok);
  EXPECT_NE(b.reply.reason.find("its limit of 6 sessions"), std::string::npos) << b.reply.reason;

  // Limits are checked after the proof: a wrong secret still learns nothing.
  auto c = admitter.admit(request(new_secret(), bob), "s4");
  EXPECT_EQ(c.reply.code, errc::auth_failed);
}

}  // namespace
}  // namespace runsnack
