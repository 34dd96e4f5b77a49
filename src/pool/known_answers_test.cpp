#include "pool/known_answers.hpp"

#include <gtest/gtest.h>

namespace runsnack::pool {
namespace {

LeasedTask task(const std::string& id, std::int64_t shard) {
  LeasedTask t;
  t.id = id, t.job = "j1", t.shard = shard, t.shards = 4, t.attempt = 2, t.workload = "exec";
  t.spec = {{"shards", 4}};
  return t;
}

// Producers on networks of their own: "pa" on "net-pa".
std::vector<KnownAnswers::Party> parties(std::initializer_list<const char*> peers) {
  std::vector<KnownAnswers::Party> out;
  for (const char* p : peers) out.push_back({p, std::string(p) + "/cpu", std::string("net-") + p});
  return out;
}

TaskResult answer(const std::string& out) {
  TaskResult r;
  r.stdout_data = out;
  r.files = nlohmann::json::array();
  return r;
}

TEST(KnownAnswers, NothingKnownNothingIssued) {
  KnownAnswers k(1);
  EXPECT_FALSE(k.issue("d1", "p1"));
  EXPECT_FALSE(k.outstanding("d1"));
}

TEST(KnownAnswers, IssuedAsARetryOfTheTaskAndTakenBack) {
  KnownAnswers k(1);
  k.learn(task("j1.3", 3), answer("three"), parties({"pa", "pb"}));
  auto t = k.issue("d1", "p1");
  ASSERT_TRUE(t);
  // On the wire: the real task's id, job, shard and spec, the next attempt.
  EXPECT_EQ(t->id, "j1.3");
  EXPECT_EQ(t->shard, 3);
  EXPECT_EQ(t->attempt, 2);
  EXPECT_EQ(t->spec, (nlohmann::json{{"shards", 4}}));
  EXPECT_TRUE(k.outstanding("d1"));
  EXPECT_FALSE(k.issue("d1", "p1"));  // one at a time
  // Another peer's result for the same task and attempt is not its answer.
  EXPECT_FALSE(k.take("p2", "j1.3", 2));
  EXPECT_FALSE(k.take("p1", "j1.3", 1));
  auto got = k.take("p1", "j1.3", 2);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->device, "d1");
  EXPECT_EQ(got->job, "j1");
  EXPECT_EQ(got->answer.stdout_data, "three");
  EXPECT_FALSE(k.outstanding("d1"));
  EXPECT_FALSE(k.take("p1", "j1.3", 2));  // answered once
  // Again for the same device: the next attempt.
  auto again = k.issue("d1", "p1");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->attempt, 3);
}

TEST(KnownAnswers, NeverToAPeerThatRanTheShard) {
  KnownAnswers k(1);
  k.learn(task("j1.0", 0), answer("zero"), parties({"pa", "pb"}));
  EXPECT_FALSE(k.issue("da", "pa"));
  EXPECT_FALSE(k.issue("db", "pb"));
  EXPECT_TRUE(k.issue("dc", "pc"));
}

TEST(KnownAnswers, PrefersOneTheDeviceHasNotHad) {
  KnownAnswers k(7);
  k.learn(task("j1.0", 0), answer("zero"), parties({"pa"}));
  k.learn(task("j1.1", 1), answer("one"), parties({"pa"}));
  auto first = k.issue("d", "p");
  ASSERT_TRUE(first);
  ASSERT_TRUE(k.take("p", first->id, first->attempt));
  auto second = k.issue("d", "p");
  ASSERT_TRUE(second);
  EXPECT_NE(first->id, second->id);
}

TEST(KnownAnswers, ForgottenWhenThePeerGoes) {
  KnownAnswers k(1);
  k.learn(task("j1.0", 0), answer("zero"), parties({"pa"}));
  auto t = k.issue("d", "p");
  ASSERT_TRUE(t);
  k.forget_peer("p");
  EXPECT_FALSE(k.outstanding("d"));
  EXPECT_FALSE(k.take("p", t->id, t->attempt));
}

TEST(KnownAnswers, KeepsTheNewestOnly) {
  KnownAnswers k(1, 2);
  k.learn(task("j1.0", 0), answer("0"), parties({}));
  k.learn(task("j1.0", 0), answer("0"), parties({}));  // known already
  EXPECT_EQ(k.known(), 1u);
  k.learn(task("j1.1", 1), answer("1"), parties({}));
  k.learn(task("j1.2", 2), answer("2"), parties({}));
  EXPECT_EQ(k.known(), 2u);
}

TEST(KnownAnswers, AWrongAnswerIsDisputedAndNeverIssuedToItsDeviceAgain) {
  KnownAnswers k(1);
  k.learn(task("j1.0", 0), answer("zero"), parties({"pa", "pb"}));
  auto t = k.issue("dn/cpu", "dn");
  ASSERT_TRUE(t);
  ASSERT_TRUE(k.take("dn", t->id, t->attempt));
  k.dispute(t->id, {"dn", "dn/cpu", "net-dn"}, answer("forged?"));
  EXPECT_EQ(k.open_disputes(), 1u);
  EXPECT_FALSE(k.issue("dn/cpu", "dn"));  // the one it disputed: never again
  EXPECT_TRUE(k.issue("other/cpu", "other"));
}

TEST(KnownAnswers, TieBreaksGoOnlyToADeviceIndependentOfBothSides) {
  KnownAnswers k(1);
  k.learn(task("j1.0", 0), answer("zero"), parties({"pa", "pb"}));
  auto t = k.issue("dn/cpu", "dn");
  ASSERT_TRUE(k.take("dn", t->id, t->attempt));
  k.dispute(t->id, {"dn", "dn/cpu", "net-dn"}, answer("other"));
  EXPECT_FALSE(k.issue_tiebreak("pa/cpu", "pa", "net-x"));   // a producer
  EXPECT_FALSE(k.issue_tiebreak("x/cpu", "x", "net-pb"));    // a producer's network
  EXPECT_FALSE(k.issue_tiebreak("y/cpu", "y", "net-dn"));    // the disputer's network
  auto tb = k.issue_tiebreak("z/cpu", "z", "net-z");
  ASSERT_TRUE(tb);
  EXPECT_FALSE(k.issue_tiebreak("w/cpu", "w", "net-w"));  // one at a time
  auto issued = k.take("z", tb->id, tb->attempt);
  ASSERT_TRUE(issued);
  EXPECT_TRUE(issued->tiebreak);
}

TEST(KnownAnswers, ATieBreakThatAgreesWithTheAnswerConvictsTheDisputer) {
  KnownAnswers k(1);
  k.learn(task("j1.0", 0), answer("zero"), parties({"pa", "pb"}));
  auto t = k.issue("dn/cpu", "dn");
  ASSERT_TRUE(k.take("dn", t->id, t->attempt));
  k.dispute(t->id, {"dn", "dn/cpu", "net-dn"}, answer("wrong"));
  auto tb = k.issue_tiebreak("z/cpu", "z", "net-z");
  ASSERT_TRUE(k.take("z", tb->id, tb->attempt));
  auto r = k.resolve(tb->id, answer("zero"));
  EXPECT_TRUE(r.tiebreak_valid);
  EXPECT_FALSE(r.answer_dropped);
  ASSERT_EQ(r.wrong.size(), 1u);
  EXPECT_EQ(r.wrong[0].device, "dn/cpu");
  EXPECT_TRUE(r.right.empty());
  EXPECT_EQ(k.known(), 1u);
  EXPECT_EQ(k.open_disputes(), 0u);
}

TEST(KnownAnswers, ATieBreakThatAgreesWithTheDisputerDropsAPlantedAnswer) {
  // A Sybil pair's agreement planted "forged"; an honest newcomer says "real".
  KnownAnswers k(1);
  k.learn(task("j1.0", 0), answer("forged"), parties({"s1", "s2"}));
  auto t = k.issue("honest/cpu", "honest");
  ASSERT_TRUE(k.take("honest", t->id, t->attempt));
  k.dispute(t->id, {"honest", "honest/cpu", "net-honest"}, answer("real"));
  auto tb = k.issue_tiebreak("z/cpu", "z", "net-z");
  ASSERT_TRUE(k.take("z", tb->id, tb->attempt));
  auto r = k.resolve(tb->id, answer("real"));
  EXPECT_TRUE(r.tiebreak_valid);
  EXPECT_TRUE(r.answer_dropped);
  ASSERT_EQ(r.right.size(), 1u);
  EXPECT_EQ(r.right[0].device, "honest/cpu");
  ASSERT_EQ(r.wrong.size(), 2u);  // the planters
  EXPECT_EQ(r.wrong[0].peer, "s1");
  EXPECT_EQ(k.known(), 0u);
}

TEST(KnownAnswers, ATieBreakThatAgreesWithNobodyJudgesNobody) {
  KnownAnswers k(1);
  k.learn(task("j1.0", 0), answer("a"), parties({"pa"}));
  auto t = k.issue("dn/cpu", "dn");
  ASSERT_TRUE(k.take("dn", t->id, t->attempt));
  k.dispute(t->id, {"dn", "dn/cpu", "net-dn"}, answer("b"));
  auto tb = k.issue_tiebreak("z/cpu", "z", "net-z");
  ASSERT_TRUE(k.take("z", tb->id, tb->attempt));
  auto r = k.resolve(tb->id, answer("c"));
  EXPECT_FALSE(r.tiebreak_valid);
  EXPECT_TRUE(r.wrong.empty());
  EXPECT_TRUE(r.right.empty());
  EXPECT_TRUE(r.answer_dropped);
}

TEST(KnownAnswers, ATieBreakHolderThatGoesAwayFreesTheDisputeForAnother) {
  KnownAnswers k(1);
  k.learn(task("j1.0", 0), answer("a"), parties({"pa"}));
  auto t = k.issue("dn/cpu", "dn");
  ASSERT_TRUE(k.take("dn", t->id, t->attempt));
  k.dispute(t->id, {"dn", "dn/cpu", "net-dn"}, answer("b"));
  ASSERT_TRUE(k.issue_tiebreak("z/cpu", "z", "net-z"));
  k.forget_peer("z");
  EXPECT_TRUE(k.issue_tiebreak("w/cpu", "w", "net-w"));
}

}  // namespace
}  // namespace runsnack::pool
