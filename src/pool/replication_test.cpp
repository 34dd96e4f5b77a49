// Replication on a real store (SQLite :memory:): where quorum copies go
// (other networks first), what the job's verification reports, and the
// known answers a decided quorum leaves.
#include "pool/replication.hpp"

#include "pool/ledger_rules.hpp"

#include "pool/test_store.hpp"

#include <gtest/gtest.h>

namespace runsnack::pool {
namespace {

const std::string kNetA = "10.0.0.0/24", kNetB = "10.0.1.0/24";
constexpr std::int64_t kWait = 20'000;  // PoolPolicy::independent_wait_ms

class ReplicationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PoolPolicy policy;
    policy.independent_wait_ms = kWait;
    store.emplace(PoolStore::open(":memory:", policy).value());
    store->grant_credits("owner", 100 * kMicroPerCredit, 1).value();
    alice = registered(*store, "alice", "cpu", "cpu", kReferenceScore, 3600, now).value();
    bob = registered(*store, "bob", "cpu", "cpu", kReferenceScore, 3600, now).value();
    carl = registered(*store, "carl", "cpu", "cpu", kReferenceScore, 3600, now).value();
    // The operator vouches for carl (`pool trust`): a quorum he agrees with is verified.
    ASSERT_TRUE(store->trust_peer("carl", true, now));
    rep.emplace(*store, [this](const nlohmann::json& e) { events.push_back(e); }, 1, known);
    rep->worker_network("alice", kNetA);
    rep->worker_network("bob", kNetA);  // alice's network
    rep->worker_network("carl", kNetB);
    nlohmann::json spec = {{"argv", {"true"}}, {"shards", 1}, {"replicas", 2}};
    job = store->create_job("owner", "exec", spec, {}, {}, 1, 10 * kMicroPerCredit, now).value();
    result.stdout_data = "same";
    result.files = nlohmann::json::array();
  }
  // dave, new, on carl's network (not alice's): independent of alice, vouched for by nobody.
  std::string dave_on_another_network() {
    auto dave = registered(*store, "dave", "cpu", "cpu", kReferenceScore, 3600, now).value();
    rep->worker_network("dave", kNetB);
    return dave;
  }
  // Alice runs shard 0 first (returning `what`, the right result unless told): her result is held
  // and a copy is queued.
  void alice_first(std::optional<TaskResult> what = std::nullopt) {
    auto t = store->claim(alice, "alice", now).value();
    ASSERT_TRUE(t);
    ASSERT_TRUE(rep->on_claimed(*t, "alice", now, {}).value());
    auto held = rep->on_result(t->id, t->attempt, "alice", alice, what.value_or(result), now, nullptr);
    ASSERT_TRUE(held);
    EXPECT_TRUE(held->value("held", false)) << held->dump();
  }
  // `peer` claims the next task; true when it keeps it.
  bool claim_task(const std::string& peer, const std::string& device, const std::vector<std::string>& free,
                  std::optional<LeasedTask>& copy) {
    copy = store->claim(device, peer, now).value();
    EXPECT_TRUE(copy);
    if (!copy) return false;
    if (rep->on_claimed(*copy, peer, now, free).value()) return true;
    EXPECT_TRUE(store->unclaim(copy->id, copy->attempt));
    return false;
  }
  bool diverse_event() const {
    for (const auto& e : events)
      if (e.value("event", "") == "quorum_not_network_diverse") return true;
    return false;
  }

  std::optional<PoolStore> store;
  KnownAnswers known{1};
  std::optional<Replication> rep;
  std::vector<nlohmann::json> events;
  std::int64_t now = 1'800'000'000'000;
  std::string alice, bob, carl, job;
  TaskResult result;
};

TEST_F(ReplicationTest, CopyGoesToAnotherNetworkWhileADeviceThereIsFree) {
  alice_first();
  std::optional<LeasedTask> copy;
  // Bob shares alice's network and carl (elsewhere) is asking for work: bob leaves it.
  EXPECT_FALSE(claim_task("bob", bob, {kNetB}, copy));
  ASSERT_TRUE(claim_task("carl", carl, {kNetA}, copy));
  EXPECT_EQ(copy->shard, 0);  // the worker runs the original shard
  auto decided = rep->on_result(copy->id, copy->attempt, "carl", carl, result, now, nullptr);
  ASSERT_TRUE(decided);
  EXPECT_TRUE(decided->value("accepted", false)) << decided->dump();
  EXPECT_EQ(rep->networks(job), 2);
  EXPECT_FALSE(diverse_event());
  EXPECT_TRUE(store->result(job, 0).value());
}

TEST_F(ReplicationTest, CopiesOnOneNetworkAreNotAQuorumWhileAnIndependentDeviceIsOnline) {
  alice_first();
  EXPECT_FALSE(rep->networks(job));  // nothing decided yet
  std::optional<LeasedTask> copy;
  ASSERT_TRUE(claim_task("bob", bob, {kNetA}, copy));  // only alice's network is free: a different PeerId will do
  auto held = rep->on_result(copy->id, copy->attempt, "bob", bob, result, now, nullptr);
  ASSERT_TRUE(held);
  EXPECT_TRUE(held->value("held", false)) << held->dump();  // one network counts once: not decided
  EXPECT_FALSE(store->result(job, 0).value());
  // One more copy, which only carl (another network) may take.
  std::optional<LeasedTask> extra;
  EXPECT_FALSE(store->claim(bob, "bob", now).value());  // the store keeps alice's network off it
  ASSERT_TRUE(claim_task("carl", carl, {}, extra));
  auto decided = rep->on_result(extra->id, extra->attempt, "carl", carl, result, now, nullptr);
  ASSERT_TRUE(decided);
  EXPECT_TRUE(decided->value("accepted", false)) << decided->dump();
  EXPECT_EQ(rep->networks(job), 2);
  EXPECT_EQ(store->job_status(job).value().unverified, 0);
  EXPECT_EQ(store->job_status(job).value().state, "done");
}

TEST_F(ReplicationTest, ASybilPairOnOneNetworkIsDeliveredUnverifiedAndJudgesNobody) {
  rep->worker_left("carl");  // nobody independent online
  TaskResult forged = result;
  forged.stdout_data = "forged";
  auto t = store->claim(alice, "alice", now).value();
  ASSERT_TRUE(rep->on_claimed(*t, "alice", now, {}).value());
  ASSERT_TRUE(rep->on_result(t->id, t->attempt, "alice", alice, forged, now, nullptr)->value("held", false));
  std::optional<LeasedTask> copy;
  ASSERT_TRUE(claim_task("bob", bob, {}, copy));
  // Held while a device on another network may still come ...
  ASSERT_TRUE(rep->on_result(copy->id, copy->attempt, "bob", bob, forged, now, nullptr)->value("held", false));
  rep->tick(now + kWait - 1, nullptr);
  EXPECT_EQ(store->job_status(job).value().state, "running");
  rep->tick(now + kWait, nullptr);  // ... none came: delivered ...
  auto st = store->job_status(job).value();
  EXPECT_EQ(st.state, "done");
  EXPECT_EQ(st.unverified, 1);  // ... as unverified
  EXPECT_EQ(st.verified, 0);    // no check counted
  EXPECT_EQ(known.known(), 0u);  // and never a known answer
  for (const auto& d : store->devices().value()) EXPECT_EQ(d.valid + d.invalid, 0) << d.id;
  bool said = false;
  for (const auto& e : events) said = said || e.value("event", "") == "quorum_unverified";
  EXPECT_TRUE(said);
  for (const auto& e : events) {
    if (e.value("event", "") == "task_done") {
      EXPECT_EQ(e.value("verified", ""), "unverified") << e.dump();
    }
  }
}

TEST_F(ReplicationTest, AVerifiedQuorumOfProvenDevicesIsAKnownAnswerForOtherPeers) {
  for (int i = 0; i < 3; ++i)  // records they earned before
    for (const auto& [d, p] : {std::pair{alice, "alice"}, std::pair{carl, "carl"}})
      ASSERT_TRUE(store->record_check(d, "earlier", p, true, "", 3, now));
  alice_first();
  std::optional<LeasedTask> copy;
  ASSERT_TRUE(claim_task("carl", carl, {}, copy));
  ASSERT_TRUE(rep->on_result(copy->id, copy->attempt, "carl", carl, result, now, nullptr));
  ASSERT_EQ(known.known(), 1u);
  EXPECT_FALSE(known.issue(alice, "alice"));  // they ran it
  EXPECT_FALSE(known.issue(carl, "carl"));
  auto kat = known.issue(bob, "bob");
  ASSERT_TRUE(kat);
  EXPECT_EQ(kat->id, job + ".0");  // the original task, again
  EXPECT_EQ(kat->shard, 0);
  EXPECT_GE(kat->attempt, 2);
  EXPECT_EQ(kat->spec.value("replicas", 0), 2);
  auto issued = known.take("bob", kat->id, kat->attempt);
  ASSERT_TRUE(issued);
  EXPECT_TRUE(same_result(issued->answer, result));
}

TEST_F(ReplicationTest, AVerifiedQuorumWithAnUnprovenDeviceTeachesNoKnownAnswer) {
  alice_first();
  std::optional<LeasedTask> copy;
  ASSERT_TRUE(claim_task("carl", carl, {}, copy));
  auto decided = rep->on_result(copy->id, copy->attempt, "carl", carl, result, now, nullptr);
  ASSERT_TRUE(decided);
  EXPECT_TRUE(decided->value("accepted", false));
  EXPECT_EQ(known.known(), 0u);  // newcomers, however independent, do not set the pool's answers
}

TEST_F(ReplicationTest, TwoNewIdentitiesOnTwoNetworksNeverVerifyEachOther) {
  // Their agreement is independent but vouched for by nobody.
  const auto dave = dave_on_another_network();
  TaskResult forged = result;
  forged.stdout_data = "forged";
  alice_first(forged);
  std::optional<LeasedTask> copy;
  ASSERT_TRUE(claim_task("dave", dave, {}, copy));
  // carl (trusted) is online: one more copy, which only he may take.
  ASSERT_TRUE(rep->on_result(copy->id, copy->attempt, "dave", dave, forged, now, nullptr)->value("held", false));
  bool asked = false;
  for (const auto& e : events) asked = asked || e.value("wants", "") == "a copy on a vouched-for device";
  EXPECT_TRUE(asked);
  std::optional<LeasedTask> extra;
  EXPECT_FALSE(store->claim(bob, "bob", now).value());  // bob, new too, may not take it
  ASSERT_TRUE(claim_task("carl", carl, {}, extra));
  auto decided = rep->on_result(extra->id, extra->attempt, "carl", carl, result, now, nullptr);
  ASSERT_TRUE(decided);
  // carl disagrees with the pair: nothing verified, nobody judged; the vouched-for value is the
  // one kept, and alice's original runs again to carry it.
  EXPECT_EQ(store->job_status(job).value().unverified, 1);
  for (const auto& d : store->devices().value()) EXPECT_EQ(d.valid + d.invalid, 0) << d.id;
  std::optional<LeasedTask> again;
  ASSERT_TRUE(claim_task("bob", bob, {}, again));
  EXPECT_EQ(again->id, job + ".0");
  auto filled = rep->on_result(again->id, again->attempt, "bob", bob, result, now, nullptr);
  ASSERT_TRUE(filled);
  EXPECT_TRUE(filled->value("accepted", false)) << filled->dump();
  EXPECT_EQ(store->job_status(job).value().state, "done");
  EXPECT_EQ(store->result(job, 0).value()->stdout_data, "same");
}

TEST_F(ReplicationTest, WithNobodyVouchedForOnlineTheirAgreementIsDeliveredUnverified) {
  const auto dave = dave_on_another_network();
  rep->worker_left("carl");
  alice_first();
  std::optional<LeasedTask> copy;
  ASSERT_TRUE(claim_task("dave", dave, {}, copy));
  auto decided = rep->on_result(copy->id, copy->attempt, "dave", dave, result, now, nullptr);
  ASSERT_TRUE(decided);
  EXPECT_TRUE(decided->value("accepted", false)) << decided->dump();
  auto st = store->job_status(job).value();
  EXPECT_EQ(st.unverified, 1);
  EXPECT_EQ(st.verified, 0);
  EXPECT_EQ(rep->networks(job), 2);
}

TEST_F(ReplicationTest, APeerRunningACopyNeverGetsTheOriginalBack) {
  alice_first();
  std::optional<LeasedTask> copy;
  ASSERT_TRUE(claim_task("bob", bob, {}, copy));
  // Alice goes away before the quorum: her lease of the original is released ...
  ASSERT_TRUE(store->release_worker("alice"));
  rep->worker_left("alice");
  // ... and it goes to carl, not to bob, who runs the shard's copy.
  std::optional<LeasedTask> original;
  EXPECT_FALSE(claim_task("bob", bob, {}, original));
  ASSERT_TRUE(claim_task("carl", carl, {}, original));
  EXPECT_EQ(original->id, job + ".0");
  // Bob's copy agrees with alice's held result, on her network: not yet a quorum;
  // carl's run, from another network, decides it and fills the original's row.
  ASSERT_TRUE(rep->on_result(copy->id, copy->attempt, "bob", bob, result, now, nullptr)->value("held", false));
  ASSERT_TRUE(rep->on_result(original->id, original->attempt, "carl", carl, result, now, nullptr));
  EXPECT_EQ(rep->networks(job), 2);
  EXPECT_TRUE(store->result(job, 0).value());
}

TEST_F(ReplicationTest, AnIndependentWorkerArrivingWithinTheWaitVerifiesTheShard) {
  rep->worker_left("carl");  // not online yet when the copies come in
  auto t = store->claim(alice, "alice", now).value();
  ASSERT_TRUE(rep->on_claimed(*t, "alice", now, {}).value());
  ASSERT_TRUE(rep->on_result(t->id, t->attempt, "alice", alice, result, now, nullptr)->value("held", false));
  std::optional<LeasedTask> copy;
  ASSERT_TRUE(claim_task("bob", bob, {}, copy));
  ASSERT_TRUE(rep->on_result(copy->id, copy->attempt, "bob", bob, result, now, nullptr)->value("held", false));
  // Only a device on another network may take the new copy; carl starts a moment later.
  std::optional<LeasedTask> extra;
  rep->tick(now + kWait / 2, nullptr);
  rep->worker_network("carl", kNetB);
  ASSERT_TRUE(claim_task("carl", carl, {kNetB}, extra));
  auto decided = rep->on_result(extra->id, extra->attempt, "carl", carl, result, now + kWait / 2, nullptr);
  ASSERT_TRUE(decided);
  EXPECT_TRUE(decided->value("accepted", false)) << decided->dump();
  auto st = store->job_status(job).value();
  EXPECT_EQ(st.state, "done");
  EXPECT_EQ(st.unverified, 0);
  EXPECT_EQ(rep->networks(job), 2);
}

TEST_F(ReplicationTest, ACopyNobodyIndependentCanTakeIsSettledUnverifiedByTheTick) {
  alice_first();
  std::optional<LeasedTask> copy;
  ASSERT_TRUE(claim_task("bob", bob, {kNetA}, copy));
  ASSERT_TRUE(rep->on_result(copy->id, copy->attempt, "bob", bob, result, now, nullptr)->value("held", false));
  rep->tick(now, nullptr);  // carl is online: the copy for another network waits for him
  EXPECT_EQ(store->job_status(job).value().state, "running");
  rep->worker_left("carl");
  rep->tick(now, nullptr);  // he may come back: the wait starts
  EXPECT_EQ(store->job_status(job).value().state, "running");
  rep->tick(now + kWait, nullptr);
  auto st = store->job_status(job).value();
  EXPECT_EQ(st.state, "done");
  EXPECT_EQ(st.unverified, 1);
}

}  // namespace
}  // namespace runsnack::pool
