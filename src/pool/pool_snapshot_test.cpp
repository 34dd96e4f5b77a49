// The dashboard snapshot over a store on SQLite :memory:.
#include "pool/pool_snapshot.hpp"

#include "pool/test_store.hpp"

#include <gtest/gtest.h>

namespace runsnack::pool {
namespace {

using json = nlohmann::json;

class Snapshot : public ::testing::Test {
 protected:
  void SetUp() override {
    PoolPolicy policy;
    store.emplace(PoolStore::open(":memory:", policy).value());
    store->grant_credits("carol", 100 * kMicroPerCredit, 1).value();
    dev_a = registered(*store, "alice", "cpu", "cpu-a", kReferenceScore, 3600, now).value();
    dev_b = registered(*store, "bob", "cpu", "cpu-b", kReferenceScore / 2, 3600, now).value();
  }
  std::optional<PoolStore> store;
  std::int64_t now = 1'800'000'000'000;
  std::string dev_a, dev_b;
};

TEST_F(Snapshot, BrowserDevicesAreMarkedWithTheirCap) {
  const auto tab = store->register_device("tab", "wasm", "a phone", 0, now, 5).value();
  auto snap = PoolSnapshot(*store).build(now).value();
  ASSERT_EQ(snap["devices"].size(), 3u);
  for (const auto& d : snap["devices"]) {
    EXPECT_EQ(d["browser"], d["id"] == tab) << d.dump();
    EXPECT_EQ(d["max_task_seconds"], d["id"] == tab ? json(5) : json(nullptr)) << d.dump();
  }
}

TEST_F(Snapshot, DevicesJobsAndLedgerWithEarningsAndProgress) {
  const json spec = {{"argv", {"render"}}};
  const json info = {{"image", {{"width", 640}, {"height", 360}}}};  // what a render plan shows
  auto job = store->create_job("carol", "render", spec, {}, info, 3, 10 * kMicroPerCredit, now).value();
  auto t = store->claim(dev_a, "alice", now).value();
  ASSERT_TRUE(t);
  ASSERT_TRUE(store->complete(t->id, t->attempt, "alice", TaskResult{}, now + 1000).value().accepted);

  PoolSnapshot snapshot(*store);
  snapshot.observe({{"event", "task_done"}, {"task", t->id}, {"peer", "alice"}});
  snapshot.observe({{"event", "task_done"}, {"task", "x"}, {"peer", "alice"}});
  snapshot.observe({{"event", "result_rejected"}, {"task", "y"}, {"peer", "alice"}});
  auto snap = snapshot.build(now + 2000).value();

  ASSERT_EQ(snap["devices"].size(), 2u);
  const json& a = snap["devices"][0];  // the faster first
  EXPECT_EQ(a["id"], dev_a);
  EXPECT_EQ(a["name"], "cpu-a");
  EXPECT_EQ(a["tasks_done"], 1);
  EXPECT_EQ(a["earnings"], "1");  // 3600/h for 1 s at reference speed
  EXPECT_DOUBLE_EQ(a["reliability"].get<double>(), 2.0 / 3.0);
  EXPECT_EQ(snap["devices"][1]["earnings"], "0");
  EXPECT_TRUE(snap["devices"][1]["reliability"].is_null());

  ASSERT_EQ(snap["jobs"].size(), 1u);
  const json& j = snap["jobs"][0];
  EXPECT_EQ(j["job"], job);
  EXPECT_EQ(j["done"], 1);
  EXPECT_EQ(j["tasks"], 3);
  EXPECT_EQ(j["image"], (json{{"width", 640}, {"height", 360}}));
  EXPECT_FALSE(j.contains("spec"));  // the command is not shown

  const json& ledger = snap["ledger"];
  EXPECT_TRUE(ledger["audit_ok"]);
  EXPECT_EQ(ledger["totals"]["minted"], "100");
  EXPECT_EQ(ledger["totals"]["escrowed"], "10");
  EXPECT_EQ(ledger["totals"]["paid"], "1");
  EXPECT_EQ(ledger["totals"]["held"], "9");
  ASSERT_FALSE(ledger["recent"].empty());
  EXPECT_EQ(ledger["recent"][0]["kind"], "payment");  // newest first
  EXPECT_EQ(ledger["recent"][0]["time"], now + 1000);
}

TEST_F(Snapshot, LimitsJobsAndEntriesToTheNewest) {
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(store->create_job("carol", "exec", {}, {}, {}, 1, 0, now + i));
  PoolSnapshot snapshot(*store, SnapshotLimits{.jobs = 2, .ledger_entries = 1});
  auto snap = snapshot.build(now + 10).value();
  ASSERT_EQ(snap["jobs"].size(), 2u);
  auto newest = store->recent_jobs(1).value();
  EXPECT_EQ(snap["jobs"][0]["job"], newest[0].id);
  EXPECT_EQ(snap["ledger"]["recent"].size(), 1u);
}

}  // namespace
}  // namespace runsnack::pool
