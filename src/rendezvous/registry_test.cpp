// The rendezvous' rules, stepped without sockets: who may register a PeerId,
// who is introduced, who may relay.
#include "rendezvous/registry.hpp"

#include "core/base32.hpp"
#include "crypto/identity.hpp"

#include <gtest/gtest.h>

namespace runsnack::rdv {
namespace {

using namespace std::chrono_literals;

constexpr const char* kGrant = "abcdefghij";

Register reg_for(const Identity& id, std::vector<std::string> grants = {kGrant}) {
  return Register{id.peer_id().str(), std::move(grants), {}, std::nullopt};
}

std::array<std::uint8_t, 32> nonce(std::uint8_t n) {
  std::array<std::uint8_t, 32> a{};
  a.fill(n);
  return a;
}

Prove prove_with(const Identity& signer, const std::array<std::uint8_t, 32>& nonce, const std::string& peer) {
  auto sig = signer.sign(registration_proof_message(nonce, peer)).value();
  return Prove{base32::encode(signer.public_key_raw()), base32::encode(sig)};
}

class RegistryTest : public ::testing::Test {
 protected:
  // Registers `id` on `conn` from `ip`, the honest way.
  void register_as(const Identity& id, ConnId conn, const std::string& ip = "192.0.2.1") {
    auto ch = reg.challenge(conn, reg_for(id), ip, Endpoint{ip, 7000}, nonce(static_cast<std::uint8_t>(conn)));
    ASSERT_TRUE(ch) << ch.error().what();
    EXPECT_EQ(base32::decode(ch->nonce).value().size(), 32u);
    auto ok = reg.prove(conn, prove_with(id, nonce(static_cast<std::uint8_t>(conn)), id.peer_id().str()));
    ASSERT_TRUE(ok) << ok.error().what();
  }

  RegistryLimits limits;
  Registry reg{limits};
  Identity alice = Identity::generate().value();
  Identity mallory = Identity::generate().value();
  SteadyTime now{};
};

TEST_F(RegistryTest, ARegistrationNeedsTheKeysSignature) {
  register_as(alice, 1);
  ASSERT_NE(reg.serving(alice.peer_id().str(), kGrant), nullptr);
  EXPECT_EQ(reg.serving(alice.peer_id().str(), kGrant)->conn, 1u);
}

TEST_F(RegistryTest, SomeoneElsesPeerIdCannotBeRegistered) {
  register_as(alice, 1);
  // Mallory claims Alice's PeerId and signs with her own key: refused.
  ASSERT_TRUE(reg.challenge(2, reg_for(alice), "198.51.100.9", Endpoint{"198.51.100.9", 1}, nonce(2)));
  auto r = reg.prove(2, prove_with(mallory, nonce(2), alice.peer_id().str()));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::auth_failed));
  // Nor with Alice's public key and her own signature.
  ASSERT_TRUE(reg.challenge(3, reg_for(alice), "198.51.100.9", Endpoint{"198.51.100.9", 1}, nonce(3)));
  auto forged = prove_with(mallory, nonce(3), alice.peer_id().str());
  forged.key = base32::encode(alice.public_key_raw());
  EXPECT_FALSE(reg.prove(3, forged));
  // A replayed proof of Alice's for another nonce is no use either.
  ASSERT_TRUE(reg.challenge(4, reg_for(alice), "198.51.100.9", Endpoint{"198.51.100.9", 1}, nonce(4)));
  EXPECT_FALSE(reg.prove(4, prove_with(alice, nonce(1), alice.peer_id().str())));
  // Alice is still the one introduced.
  EXPECT_EQ(reg.serving(alice.peer_id().str(), kGrant)->conn, 1u);
  EXPECT_EQ(reg.providers(), 1u);
  EXPECT_EQ(reg.unproven(), 0u);
}

TEST_F(RegistryTest, AnUpdateCannotChangeThePeerId) {
  register_as(mallory, 1);
  auto r = reg.update(1, reg_for(alice));
  EXPECT_FALSE(r);
  EXPECT_EQ(reg.serving(alice.peer_id().str(), kGrant), nullptr);
  EXPECT_TRUE(reg.update(1, reg_for(mallory, {"klmnopqrst"})));
  EXPECT_NE(reg.serving(mallory.peer_id().str(), "klmnopqrst"), nullptr);
  EXPECT_EQ(reg.serving(mallory.peer_id().str(), kGrant), nullptr);
}

TEST_F(RegistryTest, TheSameKeyMayRegisterTwiceAndTheNewestServes) {
  register_as(alice, 1);
  register_as(alice, 2);
  EXPECT_EQ(reg.serving(alice.peer_id().str(), kGrant)->conn, 2u);
  reg.remove(2);
  EXPECT_EQ(reg.serving(alice.peer_id().str(), kGrant)->conn, 1u);
}

TEST_F(RegistryTest, ThePerKeyLimitDisplacesTheOldest) {
  limits.max_registrations_per_peer = 2;
  Registry r(limits);
  for (ConnId c : {1u, 2u}) {
    ASSERT_TRUE(r.challenge(c, reg_for(alice), "192.0.2.1", Endpoint{"192.0.2.1", 1}, nonce(c)));
    auto ok = r.prove(c, prove_with(alice, nonce(c), alice.peer_id().str()));
    ASSERT_TRUE(ok && !*ok);
  }
  ASSERT_TRUE(r.challenge(3, reg_for(alice), "192.0.2.1", Endpoint{"192.0.2.1", 1}, nonce(3)));
  auto third = r.prove(3, prove_with(alice, nonce(3), alice.peer_id().str()));
  ASSERT_TRUE(third);
  EXPECT_EQ(*third, std::optional<ConnId>(1));
  EXPECT_EQ(r.registration(1), nullptr);
  EXPECT_EQ(r.providers(), 2u);
}

TEST_F(RegistryTest, UnprovenRegistrationsAreBoundedPerAddress) {
  limits.max_unproven_per_ip = 2;
  Registry r(limits);
  EXPECT_TRUE(r.challenge(1, reg_for(alice), "203.0.113.5", Endpoint{"203.0.113.5", 1}, nonce(1)));
  EXPECT_TRUE(r.challenge(2, reg_for(alice), "203.0.113.5", Endpoint{"203.0.113.5", 1}, nonce(2)));
  auto third = r.challenge(3, reg_for(alice), "203.0.113.5", Endpoint{"203.0.113.5", 1}, nonce(3));
  ASSERT_FALSE(third);
  EXPECT_TRUE(third.error().is(errc::exhausted));
  EXPECT_TRUE(r.challenge(4, reg_for(alice), "203.0.113.6", Endpoint{"203.0.113.6", 1}, nonce(4)));
  r.remove(1);
  EXPECT_TRUE(r.challenge(5, reg_for(alice), "203.0.113.5", Endpoint{"203.0.113.5", 1}, nonce(5)));
}

TEST_F(RegistryTest, RelayTokensOpenOnlyTheirOwnSideOnce) {
  register_as(alice, 1);
  std::string p(kTokenLength, 'p'), c(kTokenLength, 'c');
  auto t = reg.open_relay(1, p, c, now);
  ASSERT_TRUE(t);
  // The consumer cannot present its token as the provider, nor a made-up one.
  EXPECT_FALSE(reg.claim_relay(c, "provider", "198.51.100.1", now));
  EXPECT_FALSE(reg.claim_relay(std::string(kTokenLength, 'x'), "consumer", "198.51.100.1", now));
  auto first = reg.claim_relay(c, "consumer", "198.51.100.1", now);
  ASSERT_TRUE(first);
  EXPECT_FALSE(first->complete);
  EXPECT_FALSE(reg.claim_relay(c, "consumer", "198.51.100.2", now));  // spent
  auto second = reg.claim_relay(p, "provider", "192.0.2.1", now);
  ASSERT_TRUE(second);
  EXPECT_TRUE(second->complete);
  EXPECT_EQ(second->slot, first->slot);
  EXPECT_FALSE(reg.claim_relay(p, "provider", "192.0.2.1", now));
  EXPECT_EQ(reg.relay_slots(), 0u);
}

TEST_F(RegistryTest, NoRelayForAnUnregisteredProvider) {
  ASSERT_TRUE(reg.challenge(1, reg_for(alice), "192.0.2.1", Endpoint{"192.0.2.1", 1}, nonce(1)));
  EXPECT_FALSE(reg.open_relay(1, std::string(kTokenLength, 'p'), std::string(kTokenLength, 'c'), now));
  EXPECT_FALSE(reg.open_relay(9, std::string(kTokenLength, 'p'), std::string(kTokenLength, 'c'), now));
}

TEST_F(RegistryTest, RelaySidesAreBoundedPerAddressAndSlotsExpire) {
  limits.max_relay_sides_per_ip = 1;
  Registry r(limits);
  ASSERT_TRUE(r.challenge(1, reg_for(alice), "192.0.2.1", Endpoint{"192.0.2.1", 1}, nonce(1)));
  ASSERT_TRUE(r.prove(1, prove_with(alice, nonce(1), alice.peer_id().str())));
  ASSERT_TRUE(r.open_relay(1, std::string(kTokenLength, 'a'), std::string(kTokenLength, 'b'), now));
  ASSERT_TRUE(r.open_relay(1, std::string(kTokenLength, 'c'), std::string(kTokenLength, 'd'), now));
  EXPECT_TRUE(r.claim_relay(std::string(kTokenLength, 'b'), "consumer", "198.51.100.1", now));
  auto over = r.claim_relay(std::string(kTokenLength, 'd'), "consumer", "198.51.100.1", now);
  ASSERT_FALSE(over);
  EXPECT_TRUE(over.error().is(errc::exhausted));
  r.relay_side_ended("198.51.100.1");
  EXPECT_TRUE(r.claim_relay(std::string(kTokenLength, 'd'), "consumer", "198.51.100.1", now));
  auto gone = r.expire(now + limits.relay_match_timeout + 1s);
  EXPECT_EQ(gone.size(), 2u);
  EXPECT_FALSE(r.claim_relay(std::string(kTokenLength, 'a'), "provider", "192.0.2.1", now));
}

TEST_F(RegistryTest, IntroductionsAreBoundedPerAddress) {
  limits.max_pending_intros_per_ip = 1;
  Registry r(limits);
  EXPECT_TRUE(r.begin_intro("198.51.100.1"));
  EXPECT_FALSE(r.begin_intro("198.51.100.1"));
  EXPECT_TRUE(r.begin_intro("198.51.100.2"));
  r.end_intro("198.51.100.1");
  EXPECT_TRUE(r.begin_intro("198.51.100.1"));
}

}  // namespace
}  // namespace runsnack::rdv
