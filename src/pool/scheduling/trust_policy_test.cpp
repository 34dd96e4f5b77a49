// Adaptive verification: who gets replicated, how often, and when a device is out.
#include "pool/scheduling/trust_policy.hpp"

#include <gtest/gtest.h>

namespace runsnack::pool::scheduling {
namespace {

TEST(TrustPolicy, NewDevicesAreReplicatedUntilTheyProveThemselves) {
  TrustPolicy t;
  t.device_seen("d", {"p1", "n1"});
  for (int i = 0; i < t.config().proving_run; ++i) {
    EXPECT_EQ(t.replica_probability("d"), 1.0);
    EXPECT_TRUE(t.replicate("d"));
    t.record("d", Verdict::valid);
  }
  EXPECT_LT(t.replica_probability("d"), 1.0);
  EXPECT_EQ(t.replica_probability("never-seen"), 1.0);
}

TEST(TrustPolicy, ProbabilityFallsAsTheRunGrowsAndKeepsAFloor) {
  TrustPolicy t;
  double last = 1.0;
  for (int i = 0; i < 1000; ++i) {
    double p = t.replica_probability("d");
    EXPECT_LE(p, last);
    EXPECT_GE(p, t.config().min_probability);
    last = p;
    t.record("d", i % 2 ? Verdict::valid : Verdict::unchecked);
  }
  EXPECT_EQ(last, t.config().min_probability);
  EXPECT_NEAR(t.replica_probability("d"), 0.01, 1e-12);
  // The draw follows the probability (deterministic for the seed).
  int replicated = 0;
  for (int i = 0; i < 20000; ++i) replicated += t.replicate("d");
  EXPECT_NEAR(replicated / 20000.0, 0.01, 0.003);
}

TEST(TrustPolicy, AWrongResultResetsTheRun) {
  TrustPolicy t;
  for (int i = 0; i < 50; ++i) t.record("d", Verdict::valid);
  EXPECT_LT(t.replica_probability("d"), 0.1);
  auto out = t.record("d", Verdict::invalid);
  EXPECT_TRUE(out.reset);
  EXPECT_TRUE(out.audit);
  EXPECT_FALSE(out.excluded);
  EXPECT_EQ(t.find("d")->run, 0u);
  EXPECT_EQ(t.replica_probability("d"), 1.0);
}

TEST(TrustPolicy, CheaterIsExcludedAtTheThresholdOnce) {
  TrustConfig c;
  c.exclude_after_invalid = 3;
  TrustPolicy t(c);
  EXPECT_FALSE(t.record("cheat", Verdict::invalid).excluded);
  t.record("cheat", Verdict::valid);
  EXPECT_FALSE(t.record("cheat", Verdict::invalid).excluded);
  EXPECT_FALSE(t.excluded("cheat"));
  EXPECT_TRUE(t.record("cheat", Verdict::invalid).excluded);
  EXPECT_TRUE(t.excluded("cheat"));
  EXPECT_FALSE(t.record("cheat", Verdict::invalid).excluded);  // reported once
}

TEST(TrustPolicy, ReplicasGoToAnotherPeerOnAnotherNetwork) {
  TrustPolicy t;
  t.device_seen("a", {"peer1", "198.51.100.0/24"});
  t.device_seen("a2", {"peer1", "203.0.113.0/24"});   // same peer, other network
  t.device_seen("b", {"peer2", "198.51.100.0/24"});   // other peer, same network
  t.device_seen("c", {"peer3", "192.0.2.0/24"});
  EXPECT_FALSE(t.may_replicate_on("a", "a"));
  EXPECT_FALSE(t.may_replicate_on("a", "a2"));
  EXPECT_FALSE(t.may_replicate_on("a", "b"));
  EXPECT_TRUE(t.may_replicate_on("a", "c"));
  EXPECT_FALSE(t.may_replicate_on("a", "unknown"));
  EXPECT_TRUE(independent({"x", "n1"}, {"y", "n2"}));
}

TEST(TrustPolicy, NewDevicesGetHiddenKnownAnswerTasks) {
  TrustConfig c;
  c.known_answer_tasks = 2;
  c.known_answer_window = 6;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    TrustPolicy t(c, seed);
    int given = 0;
    for (int claim = 0; claim < 30; ++claim) {
      bool kat = t.known_answer_now("d");
      if (claim >= 6) {
        EXPECT_FALSE(kat);
      }
      given += kat;
    }
    EXPECT_EQ(given, 2) << "seed " << seed;
  }
}

TEST(TrustPolicy, SaveAndLoadContinueTheSameDraws) {
  TrustPolicy t({}, 4);
  t.device_seen("d", {"p", "n"});
  for (int i = 0; i < 30; ++i) t.record("d", Verdict::valid);
  t.record("e", Verdict::invalid);
  auto loaded = TrustPolicy::load(t.save());
  ASSERT_TRUE(loaded) << loaded.error().what();
  EXPECT_EQ(loaded->save(), t.save());
  for (int i = 0; i < 200; ++i) EXPECT_EQ(t.replicate("d"), loaded->replicate("d"));
  EXPECT_FALSE(TrustPolicy::load(nlohmann::json{{"version", 1}}));
  auto broken = t.save();
  broken["devices"][0]["run"] = -1;
  EXPECT_FALSE(TrustPolicy::load(broken));
}

}  // namespace
}  // namespace runsnack::pool::scheduling
