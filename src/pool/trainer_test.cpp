// The trainer's submit checks and its rounds on an in-memory store: a round's job is made with the
// training's data joined to the round's weights, and a closed round averages what came.
#include "pool/trainer.hpp"

#include "pool/training/weights.hpp"
#include "pool/wire.hpp"
#include "pool/workloads/train_round.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace runsnack::pool {
namespace {

using json = nlohmann::json;
constexpr std::int64_t kT0 = 1'700'000'000'000;

std::string weights_file(float value) {
  training::Weights w;
  w.tensors["fc.weight"] = {{2, 2}, {value, value, value, value}};
  w.tensors["fc.bias"] = {{2}, {value, value}};
  return training::encode_weights(w).value();
}

json file(const std::string& path, const std::string& data) { return {{"path", path}, {"data", base64_encode(data)}}; }

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store.emplace(PoolStore::open(":memory:", PoolPolicy{}).value());
    trainer.emplace(*store, [this](const json& e) { events.push_back(e); });
  }
  json request(json spec_extra = json::object(), json files = nullptr) {
    json spec = {{"script", "train.py"}, {"workers", 2}, {"rounds", 3}, {"local_steps", 5}};
    for (const auto& [k, v] : spec_extra.items()) spec[k] = v;
    if (files.is_null())
      files = json::array({file("train.py", "print(1)"), file("data/shard-0/x.npy", "a"), file("data/shard-1/x.npy", "b")});
    return {{"op", "train"}, {"spec", spec}, {"input", {{"files", files}}}, {"weights", base64_encode(weights_file(1))}};
  }
  std::string refusal_of(const json& answer) { return answer.value("ok", true) ? "" : answer.value("error", ""); }

  std::optional<PoolStore> store;
  std::optional<Trainer> trainer;
  std::vector<json> events;
};

TEST_F(TrainerTest, SubmitStartsTheFirstRoundWithTheDataJoinedToItsWeights) {
  auto answer = trainer->submit("carol", kT0, request());
  ASSERT_TRUE(answer.value("ok", false)) << answer.dump();
  const std::string id = answer["training"];
  auto row = store->training(id, true).value();
  ASSERT_TRUE(row && row->round_job);
  EXPECT_EQ(row->round, 0);
  EXPECT_EQ(row->weights, weights_file(1));
  auto job = store->job_status(*row->round_job).value();
  EXPECT_EQ(job.workload, kTrainRoundWorkload);
  EXPECT_EQ(job.tasks, 2);
  // What a worker fetches: the training's files and the round's weights.
  auto input = store->job_input(*row->round_job).value();
  std::set<std::string> paths;
  for (const auto& f : input["files"]) paths.insert(f["path"].get<std::string>());
  EXPECT_EQ(paths, (std::set<std::string>{"train.py", "data/shard-0/x.npy", "data/shard-1/x.npy", "weights.safetensors"}));
  auto status = trainer->status("carol", {{"training", id}});
  EXPECT_EQ(status["trainings"][0]["round_running"]["job"], *row->round_job);
  EXPECT_FALSE(trainer->status("mallory", {{"training", id}}).value("ok", true));  // not hers
}

TEST_F(TrainerTest, SubmitRefusesWhatCannotTrain) {
  EXPECT_NE(refusal_of(trainer->submit("carol", kT0, request({{"workers", 0}}))).find("--workers"), std::string::npos);
  EXPECT_NE(refusal_of(trainer->submit("carol", kT0, request({{"script", "../x.py"}}))).find("--script"), std::string::npos);
  EXPECT_NE(refusal_of(trainer->submit("carol", kT0, request({{"outer_momentum", 1.0}}))).find("--outer-momentum"),
            std::string::npos);
  // An empty shard, a path outside the layout, no script, data past the bound.
  const json no_shard1 = json::array({file("train.py", "x"), file("data/shard-0/x.npy", "a")});
  EXPECT_NE(refusal_of(trainer->submit("carol", kT0, request({}, no_shard1))).find("shard 1 has no files"), std::string::npos);
  const json outside = json::array({file("train.py", "x"), file("../etc/passwd", "a")});
  EXPECT_NE(refusal_of(trainer->submit("carol", kT0, request({}, outside))).find("bad input path"), std::string::npos);
  const json past = json::array({file("train.py", "x"), file("data/shard-0/x", "a"), file("data/shard-2/x", "b")});
  EXPECT_NE(refusal_of(trainer->submit("carol", kT0, request({}, past))).find("past --workers"), std::string::npos);
  const json no_script = json::array({file("other.py", "x"), file("data/shard-0/x", "a"), file("data/shard-1/x", "b")});
  EXPECT_NE(refusal_of(trainer->submit("carol", kT0, request({}, no_script))).find("no train.py"), std::string::npos);
  const json big = json::array({file("train.py", std::string(kMaxTrainDataBytes, 'x')), file("data/shard-0/x", "a"),
                                file("data/shard-1/x", "b")});
  EXPECT_NE(refusal_of(trainer->submit("carol", kT0, request({}, big))).find("train on a subset"), std::string::npos);
  json bad_weights = request();
  bad_weights["weights"] = base64_encode("not safetensors");
  EXPECT_NE(refusal_of(trainer->submit("carol", kT0, bad_weights)).find("--init"), std::string::npos);
  // No credit for a budget.
  json budget = request();
  budget["budget"] = 5 * kMicroPerCredit;
  EXPECT_NE(refusal_of(trainer->submit("carol", kT0, budget)).find("not enough credit"), std::string::npos);
  EXPECT_TRUE(store->running_trainings("", 10).value().empty());
}

TEST_F(TrainerTest, CancelStopsTheTrainingAndItsRound) {
  const std::string id = trainer->submit("carol", kT0, request())["training"];
  const std::string job = *store->training(id, false).value()->round_job;
  EXPECT_FALSE(trainer->cancel("mallory", kT0, {{"training", id}}).value("ok", true));
  EXPECT_TRUE(trainer->cancel("carol", kT0, {{"training", id}}).value("ok", false));
  EXPECT_EQ(store->training(id, false).value()->state, "cancelled");
  EXPECT_EQ(store->job_status(job).value().state, "cancelled");
  auto result = trainer->result("carol", {{"training", id}});
  EXPECT_EQ(base64_decode(result["weights"].get<std::string>()).value(), weights_file(1));  // what it had
}

TEST_F(TrainerTest, OneSubmitterRunsAtMostItsShare) {
  for (int i = 0; i < TrainerLimits{}.running_per_owner; ++i)
    ASSERT_TRUE(trainer->submit("carol", kT0, request()).value("ok", false)) << i;
  EXPECT_NE(refusal_of(trainer->submit("carol", kT0, request())).find("trainings running"), std::string::npos);
  EXPECT_TRUE(trainer->submit("dave", kT0, request()).value("ok", false));  // others are not held back
  // One stopped (`pool cancel LINK TRAINING`): room for another.
  const std::string first = store->running_trainings("", 1).value().front();
  EXPECT_TRUE(trainer->cancel(store->training(first, false).value()->owner, kT0, {{"training", first}}).value("ok", false));
}

TEST(TrainerTicks, EveryTrainingGetsItsTurnHoweverManyRun) {
  auto store = PoolStore::open(":memory:", PoolPolicy{}).value();
  Trainer trainer(store, [](const json&) {}, {}, TrainerLimits{1, 4});
  const json files = json::array({file("train.py", "x"), file("data/shard-0/x", "a")});
  std::vector<std::string> ids;
  for (const char* owner : {"a", "b", "c"}) {
    const json spec = {{"script", "train.py"}, {"workers", 1}, {"rounds", 2}, {"local_steps", 1}};
    auto answer = trainer.submit(owner, kT0, {{"spec", spec}, {"input", {{"files", files}}},
                                              {"weights", base64_encode(weights_file(1))}});
    ASSERT_TRUE(answer.value("ok", false)) << answer.dump();
    ids.push_back(answer["training"]);
  }
  // The first training's round still runs; the others' jobs ended (given up: no worker, so their
  // trainings fail when looked at). A tick looks at one training: in turn, not always the first.
  std::sort(ids.begin(), ids.end());
  for (std::size_t i = 1; i < ids.size(); ++i)
    store.give_up_job(*store.training(ids[i], false).value()->round_job, "test", kT0).value();
  for (int tick = 0; tick < 3; ++tick) trainer.tick(kT0 + 1);
  EXPECT_EQ(store.training(ids[0], false).value()->state, "running");
  EXPECT_EQ(store.training(ids[1], false).value()->state, "failed");
  EXPECT_EQ(store.training(ids[2], false).value()->state, "failed");
}

TEST(TrainRoundSpec, RefusesWhatAWorkerMustNotRun) {
  json good = {{"script", "train.py"}, {"round", 0}, {"shards", 2}, {"local_steps", 5}, {"seed", 1},
               {"median_norm", 0.0}, {"max_weights_bytes", 1024}};
  ASSERT_TRUE(parse_round_spec(good));
  for (auto [key, value] : std::vector<std::pair<std::string, json>>{
           {"script", "../../bin/sh"}, {"script", "-c"}, {"script", ".hidden"}, {"round", -1}, {"shards", 0},
           {"shards", kMaxTrainShards + 1}, {"local_steps", 0}, {"seed", -1}, {"median_norm", -1.0},
           {"max_weights_bytes", kMaxRoundWeightsBytes + 1}}) {
    json bad = good;
    bad[key] = value;
    EXPECT_FALSE(parse_round_spec(bad)) << key << "=" << value;
  }
  EXPECT_EQ(shard_folder(3), "data/shard-3");
  EXPECT_NE(shard_seed(5, 0), shard_seed(5, 1));
  EXPECT_NE(shard_seed(5, 1), shard_seed(6, 1));
}

}  // namespace
}  // namespace runsnack::pool
