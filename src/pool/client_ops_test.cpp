// The "pool-client" ops (client_ops.hpp) on SQLite :memory:: each op's
// answer and what it leaves in the store.
#include "pool/client_ops.hpp"

#include "core/json_fields.hpp"
#include "pool/test_store.hpp"

#include <gtest/gtest.h>

namespace runsnack::pool {
namespace {

using json = nlohmann::json;

constexpr std::int64_t kT0 = 1'800'000'000'000;

Moment at(std::int64_t ms) {
  return {TimePoint(std::chrono::milliseconds(ms)), std::chrono::steady_clock::time_point(std::chrono::milliseconds(ms))};
}

class ClientOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store.emplace(PoolStore::open(":memory:", PoolPolicy{}).value());
    store->grant_credits("carol", 100 * kMicroPerCredit, kT0).value();
    workers.emplace(*store, [this](const json& e) { events.push_back(e); }, 7);
    trainer.emplace(*store, [this](const json& e) { events.push_back(e); });
    ops.emplace(*store, *workers, *trainer, [this](const json& e) { events.push_back(e); });
  }
  json send(const std::string& peer, const json& req, const std::string& grant = "g-plain") {
    return ops->handle({peer, grant}, at(kT0), req);
  }
  json submit(const std::string& peer, json extra = json::object()) {
    json req = {{"op", "submit"}, {"workload", "exec"}, {"spec", {{"argv", {"echo", "{shard}"}}, {"shards", 2}}},
                {"input", json::object()}};
    for (const auto& [k, v] : extra.items()) req[k] = v;
    return send(peer, req);
  }

  std::optional<PoolStore> store;
  std::optional<WorkerOps> workers;
  std::optional<Trainer> trainer;
  std::optional<ClientOps> ops;
  std::vector<json> events;
};

TEST_F(ClientOpsTest, SubmitRefusesBadJobsAndEscrowsTheBudget) {
  EXPECT_NE(send("carol", {{"op", "submit"}, {"workload", "mine-bitcoin"}})["error"].get<std::string>().find(
                "unknown workload 'mine-bitcoin'"),
            std::string::npos);
  EXPECT_FALSE(submit("carol", {{"spec", {{"argv", json::array()}}}})["ok"].get<bool>());
  EXPECT_EQ(submit("carol", {{"input", "files"}})["error"], "bad input");
  EXPECT_EQ(submit("carol", {{"prefer", "slow"}})["error"], "prefer must be fast, cheap or balanced");
  EXPECT_EQ(submit("carol", {{"retries", 101}})["error"], "retries must be 0..100");
  EXPECT_TRUE(store->jobs(std::nullopt).value().empty());

  // No budget while only priced workers are online: refused, saying what to give.
  registered(*store, "alice", "cpu", "cpu", kReferenceScore, 3600, kT0).value();
  auto unpaid = submit("carol");
  EXPECT_NE(unpaid["error"].get<std::string>().find("give --budget CREDITS"), std::string::npos) << unpaid.dump();

  auto ok = submit("carol", {{"budget", 10 * kMicroPerCredit}});  // micro-credits on the wire
  ASSERT_TRUE(ok["ok"].get<bool>()) << ok.dump();
  EXPECT_EQ(ok["tasks"], 2);
  EXPECT_FALSE(ok["free_only"].get<bool>());
  auto st = store->job_status(ok["job"]).value();
  EXPECT_EQ(st.owner, "carol");
  EXPECT_EQ(st.pending, 2);
  EXPECT_EQ(store->balance(peer_account("carol")).value(), 90 * kMicroPerCredit);
}

TEST_F(ClientOpsTest, JobsListsOwnJobsStatusListsAllAndTheDevices) {
  const std::string mine = submit("carol")["job"], theirs = submit("dave")["job"];
  auto jobs = send("carol", {{"op", "jobs"}});
  ASSERT_EQ(jobs["jobs"].size(), 1u);
  EXPECT_EQ(jobs["jobs"][0]["job"], mine);
  EXPECT_FALSE(jobs.contains("devices"));
  registered(*store, "alice", "cpu", "cpu", kReferenceScore, 0, kT0).value();
  auto status = send("dave", {{"op", "status"}});
  EXPECT_EQ(status["jobs"].size(), 2u);
  ASSERT_EQ(status["devices"].size(), 1u);
  EXPECT_EQ(status["devices"][0]["network"], nullptr);  // not connected to this coordinator
  auto one = send("dave", {{"op", "status"}, {"job", theirs}});
  ASSERT_EQ(one["jobs"].size(), 1u);
  EXPECT_EQ(one["jobs"][0]["verification"]["method"], "none");
}

TEST_F(ClientOpsTest, ResultAndCancelOnlyForTheOwner) {
  const std::string job = submit("carol", {{"budget", 5 * kMicroPerCredit}})["job"];
  EXPECT_EQ(send("dave", {{"op", "result"}, {"job", job}, {"shard", 0}})["error"], "not your job");
  EXPECT_FALSE(send("carol", {{"op", "result"}, {"job", "nope"}, {"shard", 0}})["ok"].get<bool>());
  EXPECT_EQ(send("carol", {{"op", "result"}, {"job", job}, {"shard", 0}}), json({{"ok", true}, {"result", nullptr}}));

  EXPECT_FALSE(send("dave", {{"op", "cancel"}, {"job", job}})["ok"].get<bool>());
  EXPECT_EQ(store->job_status(job).value().state, "running");
  EXPECT_EQ(send("carol", {{"op", "cancel"}, {"job", job}}), json({{"ok", true}}));
  EXPECT_NE(store->job_status(job).value().state, "running");
  EXPECT_EQ(store->balance(peer_account("carol")).value(), 100 * kMicroPerCredit);  // the escrow came back
}

TEST_F(ClientOpsTest, LinkCreditsAreMintedOnceAndCreditsShowThem) {
  store->offer_link_credits("g-gift", 3 * kMicroPerCredit).value();
  auto first = send("erin", {{"op", "credits"}}, "g-gift");
  EXPECT_EQ(first["balance"], "3");
  EXPECT_EQ(first["peer"], "erin");
  EXPECT_EQ(first["entries"].size(), 1u);
  EXPECT_EQ(send("frank", {{"op", "credits"}}, "g-gift")["balance"], "0");  // the first peer took them
  EXPECT_EQ(send("erin", {{"op", "credits"}}, "g-gift")["balance"], "3");
  EXPECT_EQ(std::count_if(events.begin(), events.end(),
                          [](const json& e) { return string_or(e, "event") == "link_credits_granted"; }),
            1);
  EXPECT_EQ(send("erin", {{"op", "mint"}})["error"], "unknown op 'mint'");
}

TEST_F(ClientOpsTest, AJobStoresWhatADeviceMustRunToTakeIt) {
  // The workload's plan names it (device_runs.hpp matches it at claims).
  auto needs_of = [&](const json& answer) { return store->job_definition(answer["job"]).value().needs; };
  EXPECT_EQ(needs_of(submit("carol")), "exec");
  const json seeded = {{"source", "seed"}, {"seed", 3}, {"m", 64}, {"k", 64}, {"p", 64}, {"block", 32},
                       {"rounds", 4}, {"tolerance", 1e-3}};
  EXPECT_EQ(needs_of(submit("carol", {{"workload", "matmul"}, {"spec", seeded}})), "matmul-seeded");
  auto from_files = seeded;
  from_files["source"] = "files";
  EXPECT_EQ(needs_of(submit("carol", {{"workload", "matmul"}, {"spec", from_files}})), "matmul-files");
}

}  // namespace
}  // namespace runsnack::pool
