// The pool's pure policy (scheduler, leases, retries, ledger rules) and its
// store on SQLite :memory:, with time stepped by hand.
#include "crypto/identity.hpp"
#include "pool/ledger_rules.hpp"
#include "pool/pool_store.hpp"
#include "pool/result_message.hpp"
#include "pool/scheduler.hpp"
#include "pool/wire.hpp"
#include "pool/workload.hpp"
#include "pool/matmul/matrix.hpp"

#include "pool/test_store.hpp"

#include <gtest/gtest.h>

namespace runsnack::pool {
namespace {

using namespace std::chrono_literals;

TEST(Scheduler, FastestFreeDeviceFirst) {
  TimePoint t0{};
  std::vector<WaitingDevice> w = {{"slow", 10, t0}, {"fast", 100, t0 + 1s}, {"mid", 50, t0}};
  EXPECT_EQ(assign_fastest_first(w, 1), std::vector<std::string>{"fast"});
  EXPECT_EQ(assign_fastest_first(w, 2), (std::vector<std::string>{"fast", "mid"}));
  EXPECT_TRUE(assign_fastest_first(w, 0).empty());
  EXPECT_FALSE(may_claim("slow", w, 2));
  EXPECT_TRUE(may_claim("slow", w, 3));
  // equal speed: the one waiting longest
  std::vector<WaitingDevice> tie = {{"b", 5, t0 + 2s}, {"a", 5, t0 + 1s}};
  EXPECT_EQ(assign_fastest_first(tie, 1), std::vector<std::string>{"a"});
}

TEST(Scheduler, LeasesAndRetries) {
  ManualClock clock{from_unix(1'800'000'000)};
  auto deadline = lease_deadline(clock.now(), 30s);
  clock.advance(29s);
  EXPECT_FALSE(lease_expired(deadline, clock.now()));
  clock.advance(1s);
  EXPECT_TRUE(lease_expired(deadline, clock.now()));
}

TEST(Scheduler, LeaseCapGrowsWithResultsAndShrinksWithLosses) {
  EXPECT_EQ(lease_cap({0, 0}), kFirstLeases);
  EXPECT_EQ(lease_cap({10, 0}), kFirstLeases + 10);
  EXPECT_EQ(lease_cap({10, 3}), kFirstLeases + 4);
  EXPECT_EQ(lease_cap({0, 5}), 1);  // never none: a device that comes back may show better
  EXPECT_EQ(lease_cap({1'000'000, 0}), kMostLeases);
  // Excluded once it has lost more than it completed, past the few forgiven.
  EXPECT_FALSE(excluded_for_losses({0, kLossesForgiven - 1}));
  EXPECT_TRUE(excluded_for_losses({0, kLossesForgiven}));
  EXPECT_FALSE(excluded_for_losses({20, 10}));
  EXPECT_TRUE(excluded_for_losses({20, 21}));
}

TEST(LedgerRules, CreditsParseAndFormat) {
  EXPECT_EQ(parse_credits("10").value(), 10 * kMicroPerCredit);
  EXPECT_EQ(parse_credits("2.5").value(), 2'500'000);
  EXPECT_FALSE(parse_credits("-1"));
  EXPECT_FALSE(parse_credits("1.2345678"));
  EXPECT_FALSE(parse_credits("abc"));
  EXPECT_FALSE(parse_credits("1."));
  EXPECT_EQ(format_credits(2'500'000), "2.5");
  EXPECT_EQ(format_credits(-3), "-0.000003");
  EXPECT_EQ(format_credits(7 * kMicroPerCredit), "7");
}

TEST(LedgerRules, ChargeScalesWithScoreAndIsCapped) {
  auto base = task_charge(3600, kReferenceScore, 1000ms, 1'000'000'000);
  EXPECT_EQ(base, 1 * kMicroPerCredit);  // 3600/h for 1 s at reference speed
  EXPECT_EQ(task_charge(3600, 2 * kReferenceScore, 1000ms, 1'000'000'000), 2 * kMicroPerCredit);
  EXPECT_EQ(task_charge(3600, kReferenceScore, 1000ms, 5), 5);  // never above the escrow left
  EXPECT_EQ(task_charge(0, kReferenceScore, 1000ms, 100), 0);
  EXPECT_EQ(task_charge(1, kReferenceScore, 1ms, 100), 1);  // positive price: at least one micro-credit
}

TEST(LedgerRules, AuditFindsEachBrokenInvariant) {
  std::map<std::string, std::string> fin = {{"t1", "alice"}};
  std::vector<LedgerEntry> good = {{1, "mint", -10, "mint", {}}, {1, "peer:bob", 10, "mint", {}},
                                   {2, "peer:bob", -6, "escrow", {}}, {2, "escrow:j", 6, "escrow", {}},
                                   {3, "escrow:j", -4, "payment", "t1"}, {3, "peer:alice", 4, "payment", "t1"}};
  auto r = audit_ledger(good, fin);
  EXPECT_TRUE(r.ok) << (r.problems.empty() ? "" : r.problems[0]);
  EXPECT_EQ(r.transactions, 3);
  EXPECT_EQ(r.minted, 10);

  auto unbalanced = good;
  unbalanced[5].amount = 5;
  EXPECT_FALSE(audit_ledger(unbalanced, fin).ok);

  auto negative = good;
  negative.push_back({4, "peer:bob", -100, "escrow", {}});
  negative.push_back({4, "escrow:k", 100, "escrow", {}});
  EXPECT_FALSE(audit_ledger(negative, fin).ok);

  auto twice = good;
  twice.push_back({5, "escrow:j", -1, "payment", "t1"});
  twice.push_back({5, "peer:alice", 1, "payment", "t1"});
  EXPECT_FALSE(audit_ledger(twice, fin).ok);

  auto wrong_peer = good;
  wrong_peer[5].account = "peer:mallory";
  EXPECT_FALSE(audit_ledger(wrong_peer, fin).ok);

  auto untied = good;
  untied[5].task = std::nullopt;
  EXPECT_FALSE(audit_ledger(untied, fin).ok);
}

class Store : public ::testing::Test {
 protected:
  void SetUp() override {
    PoolPolicy policy;
    policy.max_attempts = 2;
    policy.lease_ms = 1000;
    store.emplace(PoolStore::open(":memory:", policy).value());
    store->grant_credits("carol", 100 * kMicroPerCredit, 1).value();
    dev_a = registered(*store, "alice", "cpu", "cpu", kReferenceScore, 3600, now).value();
    dev_b = registered(*store, "bob", "cpu", "cpu", kReferenceScore, 3600, now).value();
  }
  void expect_audit_ok() {
    auto r = store->audit().value();
    EXPECT_TRUE(r.ok) << (r.problems.empty() ? "" : r.problems[0]);
  }
  std::optional<PoolStore> store;
  std::int64_t now = 1'800'000'000'000;
  std::string dev_a, dev_b;
  TaskResult ok_result;
};

TEST_F(Store, TooLittleCreditIsRefusedWithTheBalance) {
  auto job = store->create_job("carol", "exec", {}, {}, {}, 2, 150 * kMicroPerCredit, now);
  ASSERT_FALSE(job);
  EXPECT_NE(job.error().message.find("balance 100"), std::string::npos) << job.error().message;
  expect_audit_ok();
}

TEST_F(Store, JobRunsPaysOncePerTaskAndRefunds) {
  auto job = store->create_job("carol", "exec", {{"argv", {"true"}}}, {}, {}, 2, 10 * kMicroPerCredit, now).value();
  EXPECT_EQ(store->balance(peer_account("carol")).value(), 90 * kMicroPerCredit);
  auto t0 = store->claim(dev_a, "alice", now).value();
  auto t1 = store->claim(dev_b, "bob", now).value();
  ASSERT_TRUE(t0 && t1);
  EXPECT_NE(t0->id, t1->id);
  EXPECT_FALSE(store->claim(dev_a, "alice", now).value());  // nothing left: never the same lease twice
  // a result from the wrong peer, or for a stale attempt, is not accepted
  EXPECT_FALSE(store->complete(t0->id, t0->attempt, "bob", ok_result, now + 500).value().accepted);
  EXPECT_FALSE(store->complete(t0->id, t0->attempt + 1, "alice", ok_result, now + 500).value().accepted);
  auto c0 = store->complete(t0->id, t0->attempt, "alice", ok_result, now + 1000).value();
  EXPECT_TRUE(c0.accepted);
  EXPECT_EQ(c0.paid, 1 * kMicroPerCredit);
  // a duplicate of an accepted result is not paid again
  EXPECT_FALSE(store->complete(t0->id, t0->attempt, "alice", ok_result, now + 1000).value().accepted);
  EXPECT_TRUE(store->complete(t1->id, t1->attempt, "bob", ok_result, now + 2000).value().accepted);
  auto st = store->job_status(job).value();
  EXPECT_EQ(st.state, "done");
  EXPECT_EQ(st.spent, 3 * kMicroPerCredit);
  EXPECT_EQ(store->balance(peer_account("carol")).value(), 97 * kMicroPerCredit);  // unused escrow returned
  EXPECT_EQ(store->balance(escrow_account(job)).value(), 0);
  expect_audit_ok();
}

TEST_F(Store, LostLeasesRequeueForeverAndChargeTheDevice) {
  auto job = store->create_job("carol", "exec", {}, {}, {}, 1, 5 * kMicroPerCredit, now).value();
  auto t = store->claim(dev_a, "alice", now).value();
  ASSERT_TRUE(t);
  store->heartbeat("alice", now + 900).value();
  EXPECT_EQ(store->expire_leases(now + 1500).value(), 0);  // renewed
  EXPECT_EQ(store->expire_leases(now + 1900).value(), 1);  // lapsed: back to pending
  auto again = store->claim(dev_b, "bob", now + 2000).value();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->attempt, 2);
  // alice's late result for the lost lease is refused; only the finisher is paid
  EXPECT_FALSE(store->complete(t->id, t->attempt, "alice", ok_result, now + 2100).value().accepted);
  // Lost again and again (more than max_attempts): the task waits for a device that finishes it.
  EXPECT_EQ(store->release_worker("bob").value(), 1);
  for (int i = 0; i < 5; ++i) {
    auto lost = store->claim(dev_a, "alice", now + 3000 + i).value();
    ASSERT_TRUE(lost);
    EXPECT_EQ(store->release_worker("alice").value(), 1);
  }
  EXPECT_EQ(store->job_status(job).value().state, "running");
  EXPECT_EQ(store->job_status(job).value().pending, 1);
  // alice lost 6 leases with no result: excluded; bob (1 lost) is not.
  EXPECT_TRUE(store->exclusion(dev_a).value());
  EXPECT_FALSE(store->exclusion(dev_b).value());
  EXPECT_EQ(store->lease_standing(dev_a, "alice").value().record.lost, 6);
  auto done = store->claim(dev_b, "bob", now + 4000).value();
  ASSERT_TRUE(done);
  EXPECT_TRUE(store->complete(done->id, done->attempt, "bob", ok_result, now + 4100).value().accepted);
  EXPECT_EQ(store->job_status(job).value().state, "done");
  EXPECT_EQ(store->lease_standing(dev_b, "bob").value().record.completed, 1);
  EXPECT_EQ(store->balance(peer_account("alice")).value(), 0);  // the lost leases earned nothing
  expect_audit_ok();
}

TEST_F(Store, AFreshDevicesFailureCountsOnlyWhenNoDeviceWithARecordIsOnline) {
  // bob earns a record (kRecordResults results) on a warm-up job.
  auto warm = store->create_job("carol", "exec", {}, {}, {}, kRecordResults, 10 * kMicroPerCredit, now).value();
  for (int i = 0; i < kRecordResults; ++i) {
    auto w = store->claim(dev_b, "bob", now, warm).value();
    ASSERT_TRUE(w);
    ASSERT_TRUE(store->complete(w->id, w->attempt, "bob", ok_result, now + 10).value().accepted);
  }
  EXPECT_EQ(store->lease_standing(dev_b, "bob").value().record.completed, kRecordResults);
  // alice, fresh, says the task failed, and its command exited 3: with bob online neither
  // counts (no attempt or retry spent); each runs on bob instead, never on alice again.
  auto job = store->create_job("carol", "exec", {}, {}, {}, 2, 10 * kMicroPerCredit, now).value();
  auto t = store->claim(dev_a, "alice", now + 20, job).value();
  ASSERT_TRUE(t);
  store->fail_attempt(t->id, t->attempt, "alice", "no disk", now + 30).value();
  auto u = store->claim(dev_a, "alice", now + 40, job).value();
  ASSERT_TRUE(u);
  EXPECT_NE(u->id, t->id);
  auto f = store->shard_failed(u->id, u->attempt, "alice", 3, "err\n", false, now + 50).value();
  EXPECT_TRUE(f.recorded && f.retried && !f.job_finished);
  EXPECT_FALSE(store->claim(dev_a, "alice", now + 60, job).value());
  EXPECT_EQ(store->job_status(job).value().state, "running");
  // bob's word counts: max_attempts (2) failures fail the task and the job.
  for (int i = 0; i < 2; ++i) {
    auto b = store->claim(dev_b, "bob", now + 70 + i, job).value();
    ASSERT_TRUE(b);
    EXPECT_EQ(b->id, t->id);
    store->fail_attempt(b->id, b->attempt, "bob", "no disk", now + 80 + i).value();
  }
  auto st = store->job_status(job).value();
  EXPECT_EQ(st.state, "failed");
  EXPECT_NE(st.reason.find("failed 2 times; last: no disk"), std::string::npos) << st.reason;
  // With no device with a record online, a fresh device's word is the best evidence there is.
  store->set_device_online("bob", false).value();
  auto alone = store->create_job("carol", "exec", {}, {}, {}, 1, 5 * kMicroPerCredit, now).value();
  for (int i = 0; i < 2; ++i) {
    auto a = store->claim(dev_a, "alice", now + 100 + i, alone).value();
    ASSERT_TRUE(a);
    store->fail_attempt(a->id, a->attempt, "alice", "no disk", now + 110 + i).value();
  }
  EXPECT_EQ(store->job_status(alone).value().state, "failed");
  expect_audit_ok();
}

TEST_F(Store, GrantsPastWhatAnAccountHoldsAreRefusedWithTheReason) {
  const Micro most = parse_credits("999999999999").value();
  ASSERT_TRUE(store->grant_credits("dave", most, now));
  auto again = store->grant_credits("dave", most, now);  // would pass kMaxBalance (and, repeated, int64)
  ASSERT_FALSE(again);
  EXPECT_NE(again.error().message.find("the most one account holds"), std::string::npos) << again.error().message;
  EXPECT_EQ(store->balance(peer_account("dave")).value(), most);
  for (const char* p : {"erin", "fred"}) ASSERT_TRUE(store->grant_credits(p, most, now));
  auto past = store->grant_credits("hank", most, now);
  ASSERT_FALSE(past);
  EXPECT_NE(past.error().message.find("ever minted"), std::string::npos) << past.error().message;
  expect_audit_ok();
}

TEST_F(Store, ReRegisteringWorkerKeepsOnlyLeasesItHasResultsFor) {
  auto job = store->create_job("carol", "exec", {}, {}, {}, 2, 5 * kMicroPerCredit, now).value();
  auto held = store->claim(dev_a, "alice", now).value();
  auto unheard = store->claim(dev_a, "alice", now).value();  // granted, answer lost with the coordinator
  ASSERT_TRUE(held && unheard);
  EXPECT_EQ(store->release_stale_leases("alice", {held->id}).value(), 1);
  EXPECT_EQ(store->job_status(job).value().pending, 1);
  EXPECT_TRUE(store->complete(held->id, held->attempt, "alice", ok_result, now + 20).value().accepted);
  EXPECT_FALSE(store->complete(unheard->id, unheard->attempt, "alice", ok_result, now + 20).value().accepted);
  auto again = store->claim(dev_b, "bob", now + 30).value();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->id, unheard->id);
  EXPECT_TRUE(store->complete(again->id, again->attempt, "bob", ok_result, now + 40).value().accepted);
  EXPECT_EQ(store->job_status(job).value().state, "done");
  expect_audit_ok();
}

TEST_F(Store, ALeaseKeepsThePriceAndScoreItWasGivenAt) {
  // Bait and switch: cheap at the claim, dear (and "fast") once the task is held.
  auto job = store->create_job("carol", "exec", {}, {}, {}, 1, 20 * kMicroPerCredit, now).value();
  auto t = store->claim(dev_a, "alice", now).value();
  ASSERT_TRUE(t);
  ASSERT_TRUE(store->register_device("alice", "cpu", "cpu", 9.9e8, now + 10));
  ASSERT_TRUE(store->set_device_score(dev_a, 9.9e14));
  auto c = store->complete(t->id, t->attempt, "alice", ok_result, now + 1000).value();
  ASSERT_TRUE(c.accepted);
  EXPECT_EQ(c.paid, 1 * kMicroPerCredit);  // 3600 credits/h at the reference score, for 1 s
  EXPECT_EQ(store->job_status(job).value().spent, 1 * kMicroPerCredit);
  expect_audit_ok();
}

TEST_F(Store, AJobWithoutABudgetGoesToFreeDevicesOnly) {
  auto job = store->create_job("carol", "exec", {}, {}, {}, 2, 0, now).value();
  EXPECT_FALSE(store->claim(dev_a, "alice", now).value());  // alice charges
  EXPECT_TRUE(store->pending_jobs(10, 10, "alice", dev_a).value().empty());
  auto free_dev = registered(*store, "dora", "cpu", "cpu", kReferenceScore, 0, now).value();
  EXPECT_EQ(store->pending_jobs(10, 10, "dora", free_dev).value().size(), 1u);
  auto t = store->claim(free_dev, "dora", now).value();
  ASSERT_TRUE(t);
  auto c = store->complete(t->id, t->attempt, "dora", ok_result, now + 1000).value();
  EXPECT_TRUE(c.accepted);
  EXPECT_EQ(c.paid, 0);
  EXPECT_EQ(store->job_status(job).value().spent, 0);
  auto prices = store->online_prices().value();
  EXPECT_EQ(prices.free, 1);
  EXPECT_EQ(prices.priced, 2);
  EXPECT_DOUBLE_EQ(prices.cheapest, 3600);
  expect_audit_ok();
}

TEST_F(Store, AJobWhoseBudgetRunsOutFailsAndNoPricedDeviceWorksOnForNothing) {
  auto job = store->create_job("carol", "exec", {}, {}, {}, 3, kMicroPerCredit / 2, now).value();
  auto t = store->claim(dev_a, "alice", now).value();
  ASSERT_TRUE(t);
  auto c = store->complete(t->id, t->attempt, "alice", ok_result, now + 1000).value();  // worth 1, half left
  EXPECT_EQ(c.paid, kMicroPerCredit / 2);
  EXPECT_TRUE(c.job_finished);
  auto st = store->job_status(job).value();
  EXPECT_EQ(st.state, "failed");
  EXPECT_NE(st.reason.find("budget is spent"), std::string::npos) << st.reason;
  EXPECT_FALSE(store->claim(dev_b, "bob", now).value());
  expect_audit_ok();
}

TEST_F(Store, ANonZeroExitIsRecordedUnpaidAndRetriedElsewhere) {
  JobRules rules;
  rules.retries = 1;
  auto job = store->create_job("carol", "exec", {}, {}, {}, 1, 5 * kMicroPerCredit, now, rules).value();
  auto t = store->claim(dev_a, "alice", now).value();
  ASSERT_TRUE(t);
  EXPECT_FALSE(store->shard_failed(t->id, t->attempt, "bob", 3, "not mine", false, now).value().recorded);
  auto f = store->shard_failed(t->id, t->attempt, "alice", 3, "err\n", false, now + 100).value();
  EXPECT_TRUE(f.recorded && f.retried && !f.job_finished);
  EXPECT_FALSE(store->claim(dev_a, "alice", now).value());  // elsewhere: not on alice again
  auto again = store->claim(dev_b, "bob", now + 200).value();
  ASSERT_TRUE(again);
  auto g = store->shard_failed(again->id, again->attempt, "bob", 4, "err2\n", false, now + 300).value();
  EXPECT_TRUE(g.recorded && !g.retried && g.job_finished);  // its one retry used
  auto st = store->job_status(job).value();
  EXPECT_EQ(st.failed, 1);
  EXPECT_EQ(st.state, "failed");
  EXPECT_NE(st.reason.find("exit code 4: err2"), std::string::npos) << st.reason;
  auto failures = store->failures(job, 10).value();
  ASSERT_EQ(failures.size(), 2u);
  EXPECT_EQ(failures[0].peer, "alice");
  EXPECT_EQ(failures[0].exit_code, 3);
  EXPECT_EQ(failures[0].stderr_tail, "err\n");
  EXPECT_EQ(failures[1].peer, "bob");
  EXPECT_EQ(store->balance(peer_account("alice")).value() + store->balance(peer_account("bob")).value(), 0);
  EXPECT_EQ(store->balance(peer_account("carol")).value(), 100 * kMicroPerCredit);  // all refunded
  expect_audit_ok();
}

TEST_F(Store, WithAllowFailuresTheJobEndsDoneWithItsFailedShards) {
  JobRules rules;
  rules.allow_failures = true;
  auto job = store->create_job("carol", "exec", {}, {}, {}, 2, 5 * kMicroPerCredit, now, rules).value();
  auto t0 = store->claim(dev_a, "alice", now).value();
  auto t1 = store->claim(dev_b, "bob", now).value();
  ASSERT_TRUE(t0 && t1);
  auto f = store->shard_failed(t0->id, t0->attempt, "alice", 3, "", false, now + 10).value();
  EXPECT_FALSE(f.job_finished);
  EXPECT_EQ(store->job_status(job).value().state, "running");
  EXPECT_TRUE(store->complete(t1->id, t1->attempt, "bob", ok_result, now + 1000).value().job_finished);
  auto st = store->job_status(job).value();
  EXPECT_EQ(st.state, "done");
  EXPECT_EQ(st.failed, 1);
  EXPECT_EQ(st.done, 1);
  expect_audit_ok();
}

TEST_F(Store, CreditsAreMintedOnlyByAGrantOrOnceByALink) {
  EXPECT_EQ(store->balance(peer_account("newcomer")).value(), 0);  // showing up mints nothing
  EXPECT_FALSE(store->grant_credits("newcomer", 0, now));
  ASSERT_TRUE(store->grant_credits("newcomer", 5 * kMicroPerCredit, now));
  EXPECT_EQ(store->balance(peer_account("newcomer")).value(), 5 * kMicroPerCredit);
  ASSERT_TRUE(store->offer_link_credits("grant1", 30 * kMicroPerCredit));
  EXPECT_EQ(store->claim_link_credits("nolink", "x", now).value(), 0);
  EXPECT_EQ(store->claim_link_credits("grant1", "first", now).value(), 30 * kMicroPerCredit);
  EXPECT_EQ(store->claim_link_credits("grant1", "first", now).value(), 0);   // once
  EXPECT_EQ(store->claim_link_credits("grant1", "second", now).value(), 0);  // for one peer
  EXPECT_EQ(store->balance(peer_account("first")).value(), 30 * kMicroPerCredit);
  auto r = store->audit().value();
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.minted, 135 * kMicroPerCredit);  // carol's 100, 5 and 30
}

TEST(Ledger, TheAuditChecksEachPaymentAgainstItsLeasesTerms) {
  std::vector<LedgerEntry> entries = {
      {1, "mint", -10 * kMicroPerCredit, "mint", std::nullopt}, {1, "peer:carol", 10 * kMicroPerCredit, "mint", std::nullopt},
      {2, "peer:carol", -10 * kMicroPerCredit, "escrow", std::nullopt}, {2, "escrow:j", 10 * kMicroPerCredit, "escrow", std::nullopt},
      {3, "escrow:j", -2 * kMicroPerCredit, "payment", "j.0"}, {3, "peer:bob", 2 * kMicroPerCredit, "payment", "j.0"}};
  std::map<std::string, std::string> fin = {{"j.0", "bob"}};
  // 3600 credits/h at the reference score for 2 s: 2 credits, as paid.
  std::map<std::string, PaidTerms> fair = {{"j.0", {3600, kReferenceScore, std::chrono::milliseconds(2000), "", {}}}};
  EXPECT_TRUE(audit_ledger(entries, fin, fair).ok);
  std::map<std::string, PaidTerms> cheap = {{"j.0", {0.001, kReferenceScore, std::chrono::milliseconds(2000), "", {}}}};
  auto r = audit_ledger(entries, fin, cheap);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.problems[0].find("more than its lease's terms allow"), std::string::npos) << r.problems[0];
  // Two results of one device paid for the same second.
  std::map<std::string, PaidTerms> twice = {
      {"j.0", {3600, kReferenceScore, std::chrono::milliseconds(2000), "bob/cpu", std::pair{0, 2000}}},
      {"j.1", {3600, kReferenceScore, std::chrono::milliseconds(2000), "bob/cpu", std::pair{1000, 3000}}}};
  r = audit_ledger(entries, fin, twice);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.problems.back().find("paid twice for the same time"), std::string::npos) << r.problems.back();
  twice["j.1"].paid_span = std::pair{2000, 4000};  // back to back
  EXPECT_TRUE(audit_ledger(entries, fin, twice).ok);
}

TEST_F(Store, CancelReturnsTheEscrow) {
  auto job = store->create_job("carol", "exec", {}, {}, {}, 3, 5 * kMicroPerCredit, now).value();
  EXPECT_FALSE(store->cancel_job(job, "mallory", now));
  ASSERT_TRUE(store->cancel_job(job, "carol", now));
  EXPECT_EQ(store->job_status(job).value().state, "cancelled");
  EXPECT_FALSE(store->claim(dev_a, "alice", now).value());
  EXPECT_EQ(store->balance(peer_account("carol")).value(), 100 * kMicroPerCredit);
  expect_audit_ok();
}

TEST_F(Store, ClaimManyLeasesLowestShardsOldestJobFirst) {
  // With budgets: a job without one would go to free devices only, and alice and bob charge.
  auto a = store->create_job("carol", "exec", {{"argv", {"a"}}}, {}, {}, 2, kMicroPerCredit, now).value();
  auto b = store->create_job("carol", "noop", {{"shards", 3}}, {}, {}, 3, kMicroPerCredit, now + 1).value();
  auto got = store->claim_many(dev_a, "alice", now, 4).value();
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].id, a + ".0");
  EXPECT_EQ(got[1].id, a + ".1");
  EXPECT_EQ(got[2].id, b + ".0");
  EXPECT_EQ(got[3].id, b + ".1");
  EXPECT_EQ(got[0].workload, "exec");
  EXPECT_EQ(got[0].spec["argv"][0], "a");
  EXPECT_EQ(got[3].workload, "noop");
  EXPECT_EQ(got[3].shards, 3);
  EXPECT_EQ(got[3].attempt, 1);
  auto rest = store->claim_many(dev_b, "bob", now, 10, b).value();  // of one job only
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].id, b + ".2");
  EXPECT_TRUE(store->claim_many(dev_b, "bob", now, 10).value().empty());  // never the same lease twice
  EXPECT_EQ(store->task_ref(b + ".1").value()->shard, 1);
}

TEST_F(Store, CompleteManySettlesExactlyAsOneAtATime) {
  // 3.5 credits of escrow, 1 credit per second of alice's device (3600/h,
  // reference score). Her batch of three results, leased together and in at
  // 1 s, is paid her first second once; her last result, at 3.5 s, the 2.5 s
  // since, which is the escrow's last 2.5 credits: the budget is spent, so
  // the job fails and the fifth task is not run for nothing.
  auto job = store->create_job("carol", "exec", {}, {}, {}, 5, 3'500'000, now).value();
  auto mine = store->claim_many(dev_a, "alice", now, 4).value();
  auto last = store->claim_many(dev_b, "bob", now, 4).value();
  ASSERT_EQ(mine.size(), 4u);
  ASSERT_EQ(last.size(), 1u);
  const std::vector<Completion> batch = {{mine[0].id, mine[0].attempt, &ok_result},
                                         {mine[0].id, mine[0].attempt, &ok_result},  // duplicate
                                         {mine[1].id, mine[1].attempt + 1, &ok_result},  // not the live lease
                                         {mine[2].id, mine[2].attempt, &ok_result},
                                         {mine[3].id, mine[3].attempt, &ok_result},
                                         {"nope", 1, &ok_result}};
  auto out = store->complete_many("alice", batch, now + 1000).value();
  ASSERT_EQ(out.size(), 6u);
  EXPECT_TRUE(out[0].accepted);
  EXPECT_EQ(out[0].paid, kMicroPerCredit);
  EXPECT_FALSE(out[1].accepted);
  EXPECT_EQ(out[1].why, "task is done");
  EXPECT_EQ(out[1].paid, 0);
  EXPECT_FALSE(out[2].accepted);
  EXPECT_EQ(out[2].why, "lease is no longer yours");
  EXPECT_TRUE(out[3].accepted && out[4].accepted);
  EXPECT_EQ(out[3].paid, 1);  // the least a result is paid: alice's second is paid for already
  EXPECT_EQ(out[4].paid, 1);
  EXPECT_FALSE(out[5].accepted);
  EXPECT_EQ(out[5].why, "no such task");
  for (const auto& o : out) EXPECT_FALSE(o.job_finished);
  EXPECT_FALSE(store->complete_many("bob", batch, now + 1000).value()[3].accepted);  // not bob's lease
  auto one = store->complete(mine[1].id, mine[1].attempt, "alice", ok_result, now + 4000).value();
  EXPECT_EQ(one.paid, 2'499'998);  // 3 s since her last paid result, capped by what the escrow holds
  EXPECT_TRUE(one.job_finished);
  const std::vector<Completion> final_one = {{last[0].id, last[0].attempt, &ok_result}};
  auto fin = store->complete_many("bob", final_one, now + 1000).value();
  EXPECT_FALSE(fin[0].accepted);
  EXPECT_EQ(fin[0].why, "job is failed");
  EXPECT_EQ(fin[0].paid, 0);
  auto st = store->job_status(job).value();
  EXPECT_EQ(st.state, "failed");
  EXPECT_NE(st.reason.find("budget is spent"), std::string::npos) << st.reason;
  EXPECT_EQ(st.done, 4);
  EXPECT_EQ(st.spent, 3'500'000);
  EXPECT_EQ(store->balance(peer_account("alice")).value(), 3'500'000);
  EXPECT_EQ(store->balance(peer_account("bob")).value(), 0);
  EXPECT_EQ(store->balance(peer_account("carol")).value(), 100 * kMicroPerCredit - 3'500'000);
  EXPECT_EQ(store->balance(escrow_account(job)).value(), 0);
  EXPECT_EQ(store->entries_for(peer_account("alice")).value().size(), 4u);  // one payment entry per paid task
  expect_audit_ok();
}

TEST_F(Store, ADeviceIsPaidForItsTimeOnceNotPerTaskOfABatch) {
  // A worker that asks for many short tasks at once, runs them one after
  // another and returns them together earns its device time, not that time
  // once per task (it was 4x here before).
  auto job = store->create_job("carol", "exec", {}, {}, {}, 6, 50 * kMicroPerCredit, now).value();
  auto four = store->claim_many(dev_a, "alice", now, 4).value();
  ASSERT_EQ(four.size(), 4u);
  std::vector<Completion> batch;
  for (const auto& t : four) batch.push_back({t.id, t.attempt, &ok_result});
  Micro paid = 0;
  for (const auto& o : store->complete_many("alice", batch, now + 2000).value()) {
    EXPECT_TRUE(o.accepted);
    paid += o.paid;
  }
  EXPECT_EQ(paid, 2 * kMicroPerCredit + 3);  // 2 s of her device, once (and the least, 1, for each other task)
  // A result held for a quorum is paid up to its arrival, not for the wait.
  auto held = store->claim(dev_a, "alice", now + 2000).value();
  ASSERT_TRUE(held);
  EXPECT_EQ(store->complete(held->id, held->attempt, "alice", ok_result, now + 30'000, now + 3000).value().paid,
            kMicroPerCredit);
  // Bob's time is his own: his lease overlaps alice's and is paid in full.
  auto bobs = store->claim(dev_b, "bob", now).value();
  ASSERT_TRUE(bobs);
  EXPECT_EQ(store->complete(bobs->id, bobs->attempt, "bob", ok_result, now + 3000).value().paid, 3 * kMicroPerCredit);
  EXPECT_EQ(store->job_status(job).value().spent, 6 * kMicroPerCredit + 3);
  expect_audit_ok();
}

TEST(ResultSigning, SignatureCoversStdoutAndFiles) {
  auto id = Identity::generate().value();
  TaskResult r;
  r.stdout_data = "hello";
  r.files = nlohmann::json::array({{{"path", "a"}, {"data", "eA=="}}});
  auto bytes = result_signing_bytes("j.0", 1, r);
  auto sig = id.sign(bytes).value();
  auto pub = id.public_key_raw();
  EXPECT_TRUE(Identity::verify(id.peer_id(), pub, bytes, sig));
  r.stdout_data = "hellO";
  EXPECT_FALSE(Identity::verify(id.peer_id(), pub, result_signing_bytes("j.0", 1, r), sig));
}

}  // namespace
}  // namespace runsnack::pool

namespace runsnack::pool {
namespace {

TEST(Ledger, KeptBalancesMatchTheEntriesAndTheAuditChecksThem) {
  PoolPolicy policy;
  auto store = PoolStore::open(":memory:", policy).value();
  store.grant_credits("carol", 100 * kMicroPerCredit, 1).value();
  std::int64_t now = 1'800'000'000'000;
  auto dev = registered(store, "bob", "cpu", "cpu", kReferenceScore, 3600, now).value();
  auto job = store.create_job("carol", "exec", {}, {}, {}, 3, 5 * kMicroPerCredit, now).value();
  for (int i = 0; i < 3; ++i) {
    auto t = store.claim(dev, "bob", now).value();
    ASSERT_TRUE(t);
    ASSERT_TRUE(store.complete(t->id, t->attempt, "bob", TaskResult{}, now + 1000).value().accepted);
  }
  EXPECT_EQ(store.job_status(job).value().state, "done");
  auto report = store.audit().value();
  EXPECT_TRUE(report.ok) << (report.problems.empty() ? "" : report.problems[0]);
  EXPECT_EQ(store.balance(escrow_account(job)).value(), 0);
  EXPECT_EQ(store.balance(peer_account("carol")).value() + store.balance(peer_account("bob")).value(),
            100 * kMicroPerCredit);
}

TEST(Batch, InnerPartsCommitOrUndoOnTheirOwnInsideOneTransaction) {
  PoolPolicy policy;
  auto store = PoolStore::open(":memory:", policy).value();
  store.grant_credits("carol", 10 * kMicroPerCredit, 1).value();
  std::int64_t now = 1'800'000'000'000;
  auto dev = registered(store, "bob", "cpu", "cpu", kReferenceScore, 3600, now).value();
  {
    auto batch = store.batch(Transaction::Lock::exclusive).value();
    EXPECT_FALSE(store.create_job("carol", "exec", {}, {}, {}, 2, 50 * kMicroPerCredit, now));  // refused: undone alone
    EXPECT_TRUE(store.create_job("carol", "exec", {}, {}, {}, 2, 5 * kMicroPerCredit, now));
    ASSERT_TRUE(batch.commit());
  }
  EXPECT_EQ(store.jobs(std::nullopt).value().size(), 1u);
  {
    auto batch = store.batch(Transaction::Lock::shared).value();
    EXPECT_TRUE(store.claim(dev, "bob", now).value());
    EXPECT_TRUE(store.claim(dev, "bob", now).value());
    EXPECT_FALSE(store.claim(dev, "bob", now).value());
    // not committed: both leases are undone
  }
  EXPECT_EQ(store.jobs(std::nullopt).value()[0].pending, 2);
  EXPECT_TRUE(store.audit().value().ok);
}

TEST(Reputation, WrongResultsGoElsewhereAndExcludeTheDevice) {
  PoolPolicy policy;
  policy.lease_ms = 1000;
  policy.max_attempts = 5;
  auto store = PoolStore::open(":memory:", policy).value();
  store.grant_credits("carol", 100 * kMicroPerCredit, 1).value();
  std::int64_t now = 1'800'000'000'000;
  auto cheat = registered(store, "mallory", "cpu", "cpu", kReferenceScore, 3600, now).value();
  auto honest = registered(store, "bob", "cpu", "cpu", kReferenceScore, 3600, now).value();
  store.create_job("carol", "matmul", {}, {}, {}, 4, 5 * kMicroPerCredit, now).value();
  for (int i = 0; i < 3; ++i) {
    auto t = store.claim(cheat, "mallory", now).value();
    ASSERT_TRUE(t);
    auto excluded = store.record_check(cheat, t->id, "mallory", false, "wrong tile", 3, now).value();
    EXPECT_EQ(excluded.has_value(), i == 2);
    store.fail_attempt(t->id, t->attempt, "mallory", "wrong tile", now).value();
  }
  // The three rejected tasks are never offered to mallory again ...
  auto fourth = store.claim(cheat, "mallory", now).value();
  ASSERT_TRUE(fourth);
  EXPECT_EQ(fourth->shard, 3);
  // ... but go to bob, whose checked results count for him.
  auto t = store.claim(honest, "bob", now).value();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->shard, 0);
  EXPECT_FALSE(store.record_check(honest, t->id, "bob", true, "", 3, now).value());
  EXPECT_TRUE(store.exclusion(cheat).value());
  EXPECT_FALSE(store.exclusion(honest).value());
  for (const auto& d : store.devices().value()) {
    if (d.id == cheat) {
      EXPECT_TRUE(d.valid == 0 && d.invalid == 3);
    }
    if (d.id == honest) {
      EXPECT_TRUE(d.valid == 1 && d.invalid == 0);
    }
  }
}

}  // namespace
}  // namespace runsnack::pool
