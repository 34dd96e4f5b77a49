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
  k.learn(task("j1.3", 3), answer("three"), {"pa", "pb"});
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
  k.learn(task("j1.0", 0), answer("zero"), {"pa", "pb"});
  EXPECT_FALSE(k.issue("da", "pa"));
  EXPECT_FALSE(k.issue("db", "pb"));
  EXPECT_TRUE(k.issue("dc", "pc"));
}

TEST(KnownAnswers, PrefersOneTheDeviceHasNotHad) {
  KnownAnswers k(7);
  k.learn(task("j1.0", 0), answer("zero"), {"pa"});
  k.learn(task("j1.1", 1), answer("one"), {"pa"});
  auto first = k.issue("d", "p");
  ASSERT_TRUE(first);
  ASSERT_TRUE(k.take("p", first->id, first->attempt));
  auto second = k.issue("d", "p");
  ASSERT_TRUE(second);
  EXPECT_NE(first->id, second->id);
}

TEST(KnownAnswers, ForgottenWhenThePeerGoes) {
  KnownAnswers k(1);
  k.learn(task("j1.0", 0), answer("zero"), {"pa"});
  auto t = k.issue("d", "p");
  ASSERT_TRUE(t);
  k.forget_peer("p");
  EXPECT_FALSE(k.outstanding("d"));
  EXPECT_FALSE(k.take("p", t->id, t->attempt));
}

TEST(KnownAnswers, KeepsTheNewestOnly) {
  KnownAnswers k(1, 2);
  k.learn(task("j1.0", 0), answer("0"), {});
  k.learn(task("j1.0", 0), answer("0"), {});  // known already
  EXPECT_EQ(k.known(), 1u);
  k.learn(task("j1.1", 1), answer("1"), {});
  k.learn(task("j1.2", 2), answer("2"), {});
  EXPECT_EQ(k.known(), 2u);
}

}  // namespace
}  // namespace runsnack::pool
