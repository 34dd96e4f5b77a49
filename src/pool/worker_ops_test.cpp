// The "pool-worker" ops (worker_ops.hpp) on SQLite :memory:, with the
// message's time stepped by hand: each op's answer and what it leaves in the store.
#include "pool/worker_ops.hpp"

#include "core/json_fields.hpp"
#include "crypto/identity.hpp"
#include "pool/wire.hpp"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>

namespace runsnack::pool {
namespace {

using json = nlohmann::json;

constexpr std::int64_t kT0 = 1'800'000'000'000;  // ms since the epoch

// The moment `ms` (ms since the epoch), steady time alongside.
Moment at(std::int64_t ms) {
  return {TimePoint(std::chrono::milliseconds(ms)), std::chrono::steady_clock::time_point(std::chrono::milliseconds(ms))};
}

struct Worker {
  Identity id = Identity::generate().value();
  WorkerSession session;
  std::vector<std::pair<std::string, std::string>> audits;  // kind, reason

  explicit Worker(const std::string& address) {
    session.consumer = id.peer_id();
    session.peer = id.peer_id().str();
    session.address = address;
    session.audit = [this](const std::string& kind, const std::string&, const std::string& reason, const json&) {
      audits.emplace_back(kind, reason);
    };
  }
  std::string public_key_hex() const {
    const auto raw = id.public_key_raw();
    return hex_encode({reinterpret_cast<const char*>(raw.data()), raw.size()});
  }
  json result_message(const std::string& task, std::int64_t attempt, const std::string& out, bool good_signature = true) const {
    TaskResult r;
    r.stdout_data = out;
    r.files = json::array();
    auto sig = id.sign(result_signing_bytes(task, attempt, r)).value();
    std::string hex = hex_encode({reinterpret_cast<const char*>(sig.data()), sig.size()});
    if (!good_signature) hex[0] = hex[0] == '0' ? '1' : '0';
    return {{"op", "result"}, {"task", task},       {"attempt", attempt},
            {"exit_code", 0}, {"stdout", base64_encode(out)}, {"files", json::array()}, {"signature", hex}};
  }
};

class WorkerOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PoolPolicy policy;
    policy.lease_ms = 1000;
    policy.max_attempts = 3;
    policy.max_price = 7200;
    // Room to claim in batches; the caps have their own test (LeaseCapsFollowTheRecord).
    policy.first_leases = kMostLeases;
    policy.fresh_leases_per_network = kMostLeases;
    store.emplace(PoolStore::open(":memory:", policy).value());
    store->grant_credits("carol", 100 * kMicroPerCredit, kT0).value();
    ops.emplace(*store, [this](const json& e) { events.push_back(e); }, 42);
  }
  // A fresh store and ops with the default lease caps (SetUp lifts them).
  void with_default_lease_caps() {
    ops.reset();
    PoolPolicy policy;
    policy.lease_ms = 1000;
    store.emplace(PoolStore::open(":memory:", policy).value());
    store->grant_credits("carol", 100 * kMicroPerCredit, kT0).value();
    ops.emplace(*store, [this](const json& e) { events.push_back(e); }, 42);
  }
  json send(Worker& w, std::int64_t ms, const json& req) { return ops->handle(w.session, at(ms), req); }
  json register_msg(const Worker& w, double price = 3600) const {
    return {{"op", "register"},
            {"public_key", w.public_key_hex()},
            {"device", {{"kind", "cpu"}, {"name", "test cpu"}, {"score", 2e6}, {"price", price}}}};
  }
  // Registered and calibrated at kT0 (the answer took half a second).
  void join(Worker& w) { join_as(w, register_msg(w)); }
  void join_as(Worker& w, const json& registration) {
    ops->worker_connected();
    auto r = send(w, kT0, registration);
    ASSERT_TRUE(r["ok"].get<bool>()) << r.dump();
    CalibrationChallenge c{r["calibrate"]["seed"], r["calibrate"]["iterations"]};
    auto cal = send(w, kT0 + 500, {{"op", "calibrated"}, {"checkpoints", answer_challenge(c)}});
    ASSERT_TRUE(cal["ok"].get<bool>()) << cal.dump();
  }
  std::string job(std::int64_t shards, const std::string& needs = "exec") {
    JobRules rules;
    rules.needs = needs;
    return store->create_job("carol", "exec", {{"argv", {"true"}}}, {{"files", json::array()}}, {}, shards,
                             10 * kMicroPerCredit, kT0, rules)
        .value();
  }
  bool has_event(const std::string& name) const {
    return std::any_of(events.begin(), events.end(), [&](const json& e) { return string_or(e, "event") == name; });
  }

  std::optional<PoolStore> store;
  std::optional<WorkerOps> ops;
  std::vector<json> events;
  Worker alice{"192.0.2.10:4000"}, bob{"198.51.100.20:4000"};
};

TEST_F(WorkerOpsTest, RegisterChecksTheKeyAndDevice) {
  auto no_key = send(alice, kT0, {{"op", "register"}});
  EXPECT_EQ(no_key["error"], "register without public_key");
  auto short_key = register_msg(alice);
  short_key["public_key"] = "abcd";
  EXPECT_EQ(send(alice, kT0, short_key)["error"], "bad public_key");
  // bob's key on alice's session
  auto other = register_msg(bob);
  EXPECT_EQ(send(alice, kT0, other)["error"], "public_key is not the session's key");
  auto bad_kind = register_msg(alice);
  bad_kind["device"]["kind"] = "tpu";
  EXPECT_EQ(send(alice, kT0, bad_kind)["error"], "bad device");
  auto dear = send(alice, kT0, register_msg(alice, 9000));
  EXPECT_NE(dear["error"].get<std::string>().find("pays at most 7200 credits"), std::string::npos) << dear.dump();
  EXPECT_TRUE(store->devices().value().empty());  // nothing refused reached the store
  EXPECT_TRUE(alice.session.device.empty());

  auto ok = send(alice, kT0, register_msg(alice));
  ASSERT_TRUE(ok["ok"].get<bool>()) << ok.dump();
  EXPECT_EQ(ok["lease_ms"], 1000);
  EXPECT_GE(ok["calibrate"]["iterations"].get<std::int64_t>(), kMinCalibrationIterations);
  EXPECT_EQ(alice.session.device, ok["device"]);
  auto devices = store->devices().value();
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(devices[0].id, alice.session.device);
  EXPECT_TRUE(devices[0].online);
  EXPECT_EQ(ops->network_of_device(alice.session.device), "192.0.2.0/24");
}

TEST_F(WorkerOpsTest, BrowserDeviceKindsRegister) {
  // A browser tab registers as webgpu, or as wasm when it has no WebGPU (docs/BROWSER-WORKERS.md).
  for (const char* kind : {"webgpu", "wasm"}) {
    auto msg = register_msg(alice);
    msg["device"]["kind"] = kind;
    auto ok = send(alice, kT0, msg);
    ASSERT_TRUE(ok["ok"].get<bool>()) << kind << ": " << ok.dump();
    EXPECT_EQ(ok["device"], alice.session.device);
    EXPECT_TRUE(alice.session.device.ends_with(std::string("/") + kind)) << alice.session.device;
  }
  EXPECT_EQ(store->devices().value().size(), 2u);
}

TEST_F(WorkerOpsTest, NothingButRegisterBeforeRegistering) {
  for (const char* op : {"heartbeat", "claim", "input", "result", "failed", "results"})
    EXPECT_EQ(send(alice, kT0, {{"op", op}})["error"], "register first") << op;
  EXPECT_EQ(send(alice, kT0, {{"op", "calibrated"}})["error"], "no calibration was asked of this device");
  join(alice);
  EXPECT_EQ(send(alice, kT0, {{"op", "launch"}})["error"], "unknown op 'launch'");
  EXPECT_EQ(send(alice, kT0, json::object())["error"], "unknown op ''");
}

TEST_F(WorkerOpsTest, CalibrationMeasuresTheScoreAndGatesClaims) {
  ops->worker_connected();
  auto r = send(alice, kT0, register_msg(alice));
  job(1);
  EXPECT_EQ(send(alice, kT0, {{"op", "claim"}})["error"], "answer the calibration first");
  CalibrationChallenge c{r["calibrate"]["seed"], r["calibrate"]["iterations"]};
  auto answer = answer_challenge(c);
  for (auto& checkpoint : answer) checkpoint[0] = checkpoint[0] == '0' ? '1' : '0';  // every segment wrong
  EXPECT_EQ(send(alice, kT0 + 100, {{"op", "calibrated"}, {"checkpoints", answer}})["error"],
            "the calibration answer is wrong");
  ASSERT_EQ(alice.audits.size(), 1u);
  EXPECT_EQ(alice.audits[0].first, "pool_calibration");
  // One answer per challenge: registering again asks again.
  EXPECT_EQ(send(alice, kT0 + 100, {{"op", "calibrated"}, {"checkpoints", answer}})["error"],
            "no calibration was asked of this device");

  r = send(alice, kT0 + 1000, register_msg(alice));
  c = {r["calibrate"]["seed"], r["calibrate"]["iterations"]};
  // The answer came 2 s after the challenge: the score is iterations / 2 s (below the hint).
  auto cal = send(alice, kT0 + 3000, {{"op", "calibrated"}, {"checkpoints", answer_challenge(c)}});
  ASSERT_TRUE(cal["ok"].get<bool>()) << cal.dump();
  EXPECT_DOUBLE_EQ(cal["score"].get<double>(), static_cast<double>(c.iterations) / 2.0);
  EXPECT_DOUBLE_EQ(store->device_score(alice.session.device).value(), static_cast<double>(c.iterations) / 2.0);
  EXPECT_TRUE(has_event("device_registered"));
  EXPECT_EQ(send(alice, kT0 + 3000, {{"op", "claim"}})["tasks"].size(), 1u);
}

TEST_F(WorkerOpsTest, ClaimLeasesUpToMaxAndSaysWhenNothingIsLeft) {
  join(alice);
  const auto j = job(3);
  auto r = send(alice, kT0 + 1000, {{"op", "claim"}, {"max", 2}});
  ASSERT_TRUE(r["ok"].get<bool>()) << r.dump();
  ASSERT_EQ(r["tasks"].size(), 2u);
  EXPECT_EQ(r["tasks"][0]["job"], j);
  EXPECT_EQ(r["tasks"][0]["workload"], "exec");
  auto st = store->job_status(j).value();
  EXPECT_EQ(st.leased, 2);
  EXPECT_EQ(st.pending, 1);
  // A mistyped max is one task; more than kMaxClaimBatch is the fair share of what is pending.
  r = send(alice, kT0 + 1000, {{"op", "claim"}, {"max", "lots"}});
  EXPECT_EQ(r["tasks"].size(), 1u);
  r = send(alice, kT0 + 1000, {{"op", "claim"}, {"max", 1000}});
  EXPECT_TRUE(r["tasks"].empty());
  EXPECT_EQ(r["retry_ms"], 200);
  EXPECT_EQ(store->job_status(j).value().leased, 3);
}

TEST_F(WorkerOpsTest, LeaseCapsFollowTheRecord) {
  // The default caps: 2 leases for a device without results, 8 for all such devices of one network.
  with_default_lease_caps();
  const auto j = job(40);
  join(alice);
  auto first = send(alice, kT0 + 1000, {{"op", "claim"}, {"max", 64}});
  ASSERT_EQ(first["tasks"].size(), static_cast<std::size_t>(kFirstLeases)) << first.dump();
  auto full = send(alice, kT0 + 1010, {{"op", "claim"}, {"max", 64}});
  EXPECT_TRUE(full["tasks"].empty()) << full.dump();
  EXPECT_EQ(full["retry_ms"], 500);
  // One result accepted: room for two more (cap 3, one still held).
  const json& t = first["tasks"][0];
  auto ok = send(alice, kT0 + 1020, alice.result_message(t["id"], t["attempt"], "ok\n"));
  ASSERT_TRUE(ok["accepted"].get<bool>()) << ok.dump();
  EXPECT_EQ(send(alice, kT0 + 1030, {{"op", "claim"}, {"max", 64}})["tasks"].size(), 2u);
  // Fresh identities on one /24 share 8 leases, however many they are.
  std::vector<std::unique_ptr<Worker>> sybils;
  std::size_t sybil_leases = 0;
  for (int i = 0; i < 6; ++i) {
    sybils.push_back(std::make_unique<Worker>("203.0.113." + std::to_string(10 + i) + ":4000"));
    join(*sybils.back());
    sybil_leases += send(*sybils.back(), kT0 + 1100, {{"op", "claim"}, {"max", 64}})["tasks"].size();
  }
  EXPECT_EQ(sybil_leases, static_cast<std::size_t>(kFreshLeasesPerNetwork));
  // They drop them all: back to pending, nothing failed, each charged what it lost.
  for (auto& w : sybils) ops->worker_left(w->session, at(kT0 + 1200));
  auto st = store->job_status(j).value();
  EXPECT_EQ(st.state, "running");
  EXPECT_EQ(st.failed, 0);
  EXPECT_EQ(st.leased, 3);  // alice's
  EXPECT_EQ(store->lease_standing(sybils[0]->session.device, sybils[0]->session.peer).value().record.lost, 2);
}

TEST_F(WorkerOpsTest, ResultsHeldForAQuorumTakeNoLeaseRoom) {
  // Two new devices at their cap of 2, each holding results whose copies only the other may
  // run: the copies must still find room, or the job waits for ever.
  with_default_lease_caps();
  const json spec = {{"argv", {"true"}}, {"shards", 4}, {"replicas", 2}};
  const auto j = store->create_job("carol", "exec", spec, {{"files", json::array()}}, {}, 4, 10 * kMicroPerCredit, kT0,
                                   JobRules{0, false, "exec"}).value();
  join(alice);
  join(bob);
  for (Worker* w : {&alice, &bob}) {
    auto got = send(*w, kT0 + 1000, {{"op", "claim"}, {"max", 64}});
    ASSERT_EQ(got["tasks"].size(), 2u) << got.dump();
    for (const auto& t : got["tasks"]) {
      auto r = send(*w, kT0 + 1100, w->result_message(t["id"], t["attempt"], "same\n"));
      EXPECT_TRUE(r.value("held", false)) << r.dump();
    }
  }
  std::size_t copies = 0;
  for (int round = 0; round < 3; ++round)  // a claim takes at most its fair share of what is pending
    for (Worker* w : {&alice, &bob}) {
      auto got = send(*w, kT0 + 1200 + round, {{"op", "claim"}, {"max", 64}});
      for (const auto& t : got["tasks"]) {
        ++copies;
        auto r = send(*w, kT0 + 1300 + round, w->result_message(t["id"], t["attempt"], "same\n"));
        EXPECT_TRUE(r.value("accepted", false)) << r.dump();
      }
    }
  EXPECT_EQ(copies, 4u);
  EXPECT_EQ(store->job_status(j).value().state, "done");
}

TEST_F(WorkerOpsTest, HeartbeatRenewsLeasesAndAnyMessageDoesOnceASecond) {
  join(alice);
  job(2);
  auto r = send(alice, kT0 + 1000, {{"op", "claim"}});
  ASSERT_EQ(r["tasks"].size(), 1u);
  // The lease (1 s) would end at kT0 + 2000; a heartbeat at +1800 moves it to +2800.
  EXPECT_EQ(send(alice, kT0 + 1800, {{"op", "heartbeat"}}), json({{"ok", true}}));
  EXPECT_EQ(store->expire_leases(kT0 + 2500).value(), 0);
  // Another message within a second of the last renewal does not renew.
  send(alice, kT0 + 2700, {{"op", "input"}, {"job", "none"}});
  EXPECT_EQ(store->expire_leases(kT0 + 2900).value(), 1);
}

TEST_F(WorkerOpsTest, ResultIsPaidOnceAndRefusedForOthersLeases) {
  join(alice);
  join(bob);
  const auto j = job(2);
  auto a = send(alice, kT0 + 1000, {{"op", "claim"}})["tasks"][0];
  auto b = send(bob, kT0 + 1000, {{"op", "claim"}})["tasks"][0];
  const std::string ta = a["id"], tb = b["id"];
  const std::int64_t aa = a["attempt"];

  EXPECT_EQ(send(alice, kT0 + 1100, {{"op", "result"}})["error"], "result without its task id");
  // Unknown task: no lease of this peer
  auto unknown = send(alice, kT0 + 1100, alice.result_message("no-such-task", 1, "x"));
  EXPECT_FALSE(unknown["accepted"].get<bool>()) << unknown.dump();
  // bob's task, signed by alice: not her lease
  auto others = send(alice, kT0 + 1100, alice.result_message(tb, b["attempt"], "x"));
  EXPECT_FALSE(others["accepted"].get<bool>()) << others.dump();
  EXPECT_EQ(store->job_status(j).value().done, 0);
  // a signature that does not verify: rejected, the attempt fails and the task goes back
  auto forged = send(bob, kT0 + 1100, bob.result_message(tb, b["attempt"], "x", false));
  EXPECT_EQ(forged["why"], "result signature does not verify");
  EXPECT_TRUE(has_event("result_rejected"));
  EXPECT_EQ(store->job_status(j).value().pending, 1);

  auto good = send(alice, kT0 + 1200, alice.result_message(ta, aa, "hello"));
  ASSERT_TRUE(good["accepted"].get<bool>()) << good.dump();
  EXPECT_NE(good["paid"], "0");
  EXPECT_EQ(store->job_status(j).value().done, 1);
  EXPECT_EQ(store->result(j, a["shard"]).value()->stdout_data, "hello");
  const auto balance = store->balance(peer_account(alice.session.peer)).value();
  EXPECT_GT(balance, 0);
  // the same result again: not paid twice
  auto again = send(alice, kT0 + 1300, alice.result_message(ta, aa, "hello"));
  EXPECT_FALSE(again["accepted"].get<bool>());
  EXPECT_EQ(store->balance(peer_account(alice.session.peer)).value(), balance);
}

TEST_F(WorkerOpsTest, ResultAfterTheLeaseExpiredIsNotAccepted) {
  join(alice);
  const auto j = job(1);
  auto t = send(alice, kT0 + 1000, {{"op", "claim"}})["tasks"][0];
  EXPECT_EQ(store->expire_leases(kT0 + 2500).value(), 1);
  auto late = send(alice, kT0 + 2600, alice.result_message(t["id"], t["attempt"], "late"));
  EXPECT_FALSE(late["accepted"].get<bool>()) << late.dump();
  EXPECT_EQ(store->job_status(j).value().done, 0);
  EXPECT_EQ(store->balance(peer_account(alice.session.peer)).value(), 0);
}

TEST_F(WorkerOpsTest, FailedRequeuesTheTask) {
  join(alice);
  const auto j = job(1);
  auto t = send(alice, kT0 + 1000, {{"op", "claim"}})["tasks"][0];
  EXPECT_EQ(send(alice, kT0 + 1100, {{"op", "failed"}})["error"], "failed without its task id");
  auto r = send(alice, kT0 + 1100, {{"op", "failed"}, {"task", t["id"]}, {"attempt", t["attempt"]}, {"reason", "no disk"}});
  EXPECT_TRUE(r["ok"].get<bool>()) << r.dump();
  auto st = store->job_status(j).value();
  EXPECT_EQ(st.pending, 1);
  EXPECT_EQ(st.leased, 0);
  ASSERT_TRUE(has_event("task_failed"));
}

TEST_F(WorkerOpsTest, ResultsBatchAnswersEachInOrder) {
  join(alice);
  const auto j = job(3);
  auto tasks = send(alice, kT0 + 1000, {{"op", "claim"}, {"max", 3}})["tasks"];
  ASSERT_EQ(tasks.size(), 3u);
  json batch = {{"op", "results"},
                {"results",
                 {alice.result_message(tasks[0]["id"], tasks[0]["attempt"], "a"), json{{"op", "claim"}},
                  {{"op", "failed"}, {"task", tasks[1]["id"]}, {"attempt", tasks[1]["attempt"]}},
                  alice.result_message(tasks[2]["id"], tasks[2]["attempt"], "c")}}};
  auto r = send(alice, kT0 + 1200, batch);
  ASSERT_TRUE(r["ok"].get<bool>()) << r.dump();
  ASSERT_EQ(r["answers"].size(), 4u);
  EXPECT_TRUE(r["answers"][0]["accepted"].get<bool>());
  EXPECT_EQ(r["answers"][1]["error"], "a batch holds results and failures only");
  EXPECT_EQ(r["answers"][2], json({{"ok", true}}));
  EXPECT_TRUE(r["answers"][3]["accepted"].get<bool>());
  auto st = store->job_status(j).value();
  EXPECT_EQ(st.done, 2);
  EXPECT_EQ(st.pending, 1);

  EXPECT_EQ(send(alice, kT0 + 1300, {{"op", "results"}, {"results", "all"}})["error"], "results must be a list of at most 64");
  EXPECT_EQ(send(alice, kT0 + 1300, {{"op", "results"}, {"results", json(std::vector<int>(65, 0))}})["error"],
            "results must be a list of at most 64");
}

TEST_F(WorkerOpsTest, InputOfAJobAndOfNone) {
  join(alice);
  const auto j = job(1);
  auto r = send(alice, kT0, {{"op", "input"}, {"job", j}});
  EXPECT_EQ(r["input"], json({{"files", json::array()}}));
  EXPECT_FALSE(send(alice, kT0, {{"op", "input"}, {"job", "nope"}})["ok"].get<bool>());
}

TEST_F(WorkerOpsTest, ReRegisterReleasesLeasesItDoesNotHoldAndLeavingRequeues) {
  join(alice);
  const auto j = job(3);
  auto tasks = send(alice, kT0 + 1000, {{"op", "claim"}, {"max", 3}})["tasks"];
  ASSERT_EQ(tasks.size(), 3u);
  // It comes back (a new stream) holding a result for the first task only.
  auto again = register_msg(alice);
  again["holding"] = {tasks[0]["id"]};
  ASSERT_TRUE(send(alice, kT0 + 1100, again)["ok"].get<bool>());
  EXPECT_TRUE(has_event("stale_leases_released"));
  EXPECT_EQ(store->job_status(j).value().leased, 1);
  // The stream ends: the last lease goes back too.
  EXPECT_EQ(ops->worker_left(alice.session, at(kT0 + 1200)), 1);
  auto st = store->job_status(j).value();
  EXPECT_EQ(st.leased, 0);
  EXPECT_EQ(st.pending, 3);
  EXPECT_FALSE(ops->network_of_device(alice.session.device));
}

TEST_F(WorkerOpsTest, ABrowserDeviceGetsOnlyTasksOfJobsItSaysItRuns) {
  auto browser_msg = [&](json runs) {
    auto m = register_msg(bob, 0);
    m["device"]["kind"] = "webgpu";
    if (!runs.is_null()) m["device"]["runs"] = runs;
    return m;
  };
  for (const json& bad : {json::array(), json("render"), json::array({"Render"}), json::array({std::string(33, 'a')}),
                          json::array({1})})
    EXPECT_EQ(send(bob, kT0, browser_msg(bad))["error"].get<std::string>().rfind("bad device: device.runs", 0), 0u)
        << bad.dump();
  EXPECT_TRUE(store->devices().value().empty());

  const auto exec_job = job(2, "exec");
  const auto old_job = job(1, "");  // from before jobs said what they need: native devices only
  const auto files_job = job(1, "matmul-files");
  const auto seeded_job = job(2, "matmul-seeded");
  join_as(bob, browser_msg(json::array({"matmul-seeded", "render"})));
  EXPECT_FALSE(bob.session.runs.everything);

  // The older jobs come first for anyone who can run them; the browser skips them.
  auto got = send(bob, kT0 + 1000, {{"op", "claim"}, {"max", 8}});
  ASSERT_TRUE(got["ok"].get<bool>()) << got.dump();
  ASSERT_EQ(got["tasks"].size(), 2u) << got.dump();
  for (const auto& t : got["tasks"]) EXPECT_EQ(t["job"], seeded_job) << t.dump();
  auto none = send(bob, kT0 + 1100, {{"op", "claim"}, {"max", 8}});
  EXPECT_TRUE(none["tasks"].empty()) << none.dump();

  // A native worker takes the rest, oldest job first.
  join(alice);
  EXPECT_TRUE(alice.session.runs.everything);
  auto rest = send(alice, kT0 + 1200, {{"op", "claim"}, {"max", 8}});
  std::set<std::string> jobs;
  for (const auto& t : rest["tasks"]) jobs.insert(t["job"].get<std::string>());
  EXPECT_EQ(jobs, (std::set<std::string>{exec_job})) << rest.dump();
  std::size_t leased = rest["tasks"].size();
  for (int i = 0; i < 4 && leased < 4; ++i) leased += send(alice, kT0 + 1300 + i, {{"op", "claim"}, {"max", 8}})["tasks"].size();
  EXPECT_EQ(leased, 4u);  // exec x2, the old job, the files job
}

TEST_F(WorkerOpsTest, RegisterKeepsTheCapAndRefusesBadOnes) {
  for (const json& bad : {json(0), json(86401), json(-5), json(1.5), json("10")}) {
    auto m = register_msg(alice);
    m["device"]["max_task_seconds"] = bad;
    auto r = send(alice, kT0, m);
    EXPECT_EQ(r["error"], "bad device: device.max_task_seconds must be " +
                              std::string(bad.is_number_integer() ? "in" : "a whole number of seconds in") + " 1..86400")
        << bad.dump();
  }
  EXPECT_TRUE(store->devices().value().empty());
  auto m = register_msg(alice);
  m["device"]["kind"] = "wasm";
  m["device"]["max_task_seconds"] = 5;
  join_as(alice, m);
  EXPECT_EQ(alice.session.max_task_seconds, std::optional<std::int64_t>(5));
  join(bob);
  std::map<std::string, DeviceInfo> devices;
  for (auto& d : store->devices().value()) devices[d.id] = d;
  EXPECT_EQ(devices.at(alice.session.device).max_task_seconds, std::optional<std::int64_t>(5));
  EXPECT_EQ(devices.at(bob.session.device).max_task_seconds, std::nullopt);
}

// The learned scheduler knows the exec workload from alice's 20 s task: a
// device capped at 10 s is not offered the job's other task, one capped at
// an hour is.
TEST_F(WorkerOpsTest, ACappedDeviceIsNotOfferedTasksItWouldRunPastItsCap) {
  ops->use_learned_scheduler(at(kT0));
  join(alice);
  const auto j = job(2);
  auto t = send(alice, kT0 + 1000, {{"op", "claim"}});
  ASSERT_EQ(t["tasks"].size(), 1u) << t.dump();
  auto done = send(alice, kT0 + 21000, alice.result_message(t["tasks"][0]["id"], t["tasks"][0]["attempt"], "x"));
  ASSERT_TRUE(done["accepted"].get<bool>()) << done.dump();
  ops->worker_left(alice.session, at(kT0 + 21000));
  EXPECT_GT(ops->learned_estimates(alice.session.device)["exec"]["task_seconds"].get<double>(), 10);

  auto capped = register_msg(bob);
  capped["device"]["max_task_seconds"] = 10;
  join_as(bob, capped);
  // Long past kStarvedAfter: the job would go to anyone who may take it.
  auto none = send(bob, kT0 + 60000, {{"op", "claim"}});
  ASSERT_TRUE(none["ok"].get<bool>()) << none.dump();
  EXPECT_TRUE(none["tasks"].empty()) << none.dump();
  EXPECT_EQ(store->job_status(j).value().pending, 1);

  capped["device"]["max_task_seconds"] = 3600;
  join_as(bob, capped);
  auto got = send(bob, kT0 + 61000, {{"op", "claim"}});
  ASSERT_EQ(got["tasks"].size(), 1u) << got.dump();
  EXPECT_EQ(got["tasks"][0]["job"], j);
}

TEST_F(WorkerOpsTest, AbandonPastTheCapReturnsTheTaskUnspentAndKeepsTheDeviceOffTheJob) {
  auto capped = register_msg(bob);
  capped["device"]["max_task_seconds"] = 10;
  join_as(bob, capped);
  join(alice);
  const auto first = job(1), second = job(1);
  auto t = send(bob, kT0 + 1000, {{"op", "claim"}})["tasks"][0];
  ASSERT_EQ(t["job"], first) << t.dump();
  const json abandon = {{"op", "abandon"}, {"task", t["id"]}, {"attempt", t["attempt"]}};

  EXPECT_EQ(send(bob, kT0 + 1100, {{"op", "abandon"}})["error"], "abandon without its task id");
  // Before its cap has passed since the lease: not a task it ran past its cap.
  EXPECT_EQ(send(bob, kT0 + 10000, abandon)["error"],
            "no lease of this task attempt held past this device's max_task_seconds");
  // Not alice's to give back, nor may an uncapped device abandon.
  EXPECT_EQ(send(alice, kT0 + 12000, abandon)["error"],
            "only a device that stated device.max_task_seconds may abandon a task");
  EXPECT_EQ(store->job_status(first).value().leased, 1);

  auto r = send(bob, kT0 + 11000, abandon);
  ASSERT_TRUE(r["ok"].get<bool>()) << r.dump();
  EXPECT_TRUE(has_event("task_abandoned"));
  EXPECT_FALSE(has_event("task_failed"));
  auto st = store->job_status(first).value();
  EXPECT_EQ(st.pending, 1);
  EXPECT_EQ(st.leased, 0);
  // Twice: nothing left to give back.
  EXPECT_FALSE(send(bob, kT0 + 11100, abandon)["ok"].get<bool>());

  // bob is offered the second job, not the first again.
  auto next = send(bob, kT0 + 12000, {{"op", "claim"}});
  ASSERT_EQ(next["tasks"].size(), 1u) << next.dump();
  EXPECT_EQ(next["tasks"][0]["job"], second);
  EXPECT_TRUE(send(bob, kT0 + 13000, {{"op", "claim"}})["tasks"].empty());
  // The abandoned task's try was not spent: alice runs it as the same attempt, and no record moved.
  auto again = send(alice, kT0 + 14000, {{"op", "claim"}});
  ASSERT_EQ(again["tasks"].size(), 1u) << again.dump();
  EXPECT_EQ(again["tasks"][0]["id"], t["id"]);
  EXPECT_EQ(again["tasks"][0]["attempt"], t["attempt"]);
  for (const auto& d : store->devices().value()) EXPECT_EQ(d.valid + d.invalid, 0) << d.id;
  EXPECT_TRUE(store->devices().value().size() == 2u);
}

TEST(DeviceRuns, NativeDevicesRunEverythingBrowsersWhatTheyList) {
  auto cpu = parse_device_runs("cpu", json{{"kind", "cpu"}}).value();
  EXPECT_TRUE(cpu.allows("exec"));
  EXPECT_TRUE(cpu.allows(""));
  EXPECT_EQ(cpu.sql_list(), "*");
  auto first_page = parse_device_runs("webgpu", json{{"kind", "webgpu"}}).value();  // said nothing
  EXPECT_TRUE(first_page.allows("matmul-seeded"));
  EXPECT_FALSE(first_page.allows("render"));
  auto page = parse_device_runs("wasm", json{{"runs", {"render", "matmul-seeded", "render"}}}).value();
  EXPECT_EQ(page.sql_list(), ",render,matmul-seeded,");
  EXPECT_FALSE(page.allows(""));
  EXPECT_FALSE(page.allows("exec"));
  EXPECT_FALSE(parse_device_runs("wasm", json{{"runs", json::array({"a%", "b"})}}));  // no LIKE wildcards reach SQL
  EXPECT_FALSE(parse_device_runs("wasm", json{{"runs", json(std::vector<std::string>(17, "x"))}}));
}

}  // namespace
}  // namespace runsnack::pool
