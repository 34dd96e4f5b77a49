// A training's data past one message: uploaded in chunks, checked against its digest, bounded,
// read back by workers, and dropped with the training (pool/training_data.hpp, pool/trainer.hpp).
#include "pool/training_data.hpp"

#include "fs/safe_fs.hpp"
#include "pool/test_store.hpp"
#include "pool/trainer.hpp"
#include "pool/training/weights.hpp"
#include "pool/wire.hpp"
#include "pool/workloads/train_round.hpp"

#include <gtest/gtest.h>

namespace runsnack::pool {
namespace {

using json = nlohmann::json;
constexpr std::int64_t kT0 = 1'700'000'000'000;

std::string weights_file() {
  training::Weights w;
  w.tensors["w"] = {{2}, {1, 2}};
  return training::encode_weights(w).value();
}

std::string bytes_of(std::size_t n, char seed) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i * 7 + i / 4093);
  return s;
}

std::string digest(const std::string& s) { return fs::sha256_hex(s.data(), s.size()); }

class TrainingDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store.emplace(PoolStore::open(":memory:", PoolPolicy{}).value());
    trainer.emplace(*store, [this](const json& e) { events.push_back(e); }, nullptr, limits);
  }
  // train.py inline, shard 0's big file by digest, shard 1's small one inline.
  json submit(const std::string& owner, const std::string& big) {
    const json files = json::array({{{"path", "train.py"}, {"data", base64_encode("print(1)")}},
                                    {{"path", "data/shard-0/x.npy"}, {"sha256", digest(big)}, {"size", big.size()}},
                                    {{"path", "data/shard-1/x.npy"}, {"data", base64_encode("small")}}});
    const json spec = {{"script", "train.py"}, {"workers", 2}, {"rounds", 1}, {"local_steps", 1}};
    return trainer->submit(owner, kT0, {{"op", "train"}, {"spec", spec}, {"input", {{"files", files}}},
                                        {"weights", base64_encode(weights_file())}});
  }
  json upload(const std::string& owner, const std::string& training, const std::string& sha, std::uint64_t offset,
              std::string_view bytes) {
    return trainer->upload(owner, kT0 + 1000, {{"training", training}, {"sha256", sha}, {"offset", offset},
                                              {"data", base64_encode(bytes)}});
  }
  static std::string error_of(const json& answer) { return answer.value("ok", true) ? "" : answer.value("error", ""); }

  TrainerLimits limits;
  std::optional<PoolStore> store;
  std::optional<Trainer> trainer;
  std::vector<json> events;
};

TEST_F(TrainingDataTest, DataPastOneMessageComesInChunksInOrderAndTheRoundStartsWhenItIsAllIn) {
  const std::string big = bytes_of(9 * 1024 * 1024 + 17, 'a'), sha = digest(big);
  auto answer = submit("carol", big);
  ASSERT_TRUE(answer.value("ok", false)) << answer.dump();
  const std::string id = answer["training"];
  EXPECT_EQ(answer["missing"], json::array({sha}));  // the inline ones are stored already
  EXPECT_FALSE(store->training(id, false).value()->round_job);  // no round before the data is in
  const std::string_view all(big);
  const auto chunk = [&](std::uint64_t i) { return all.substr(i * kTrainChunkBytes, kTrainChunkBytes); };
  ASSERT_TRUE(upload("carol", id, sha, 0, chunk(0)).value("ok", false));
  // The same chunk again, a chunk past a gap, a short one that is not the last: refused, nothing lost.
  EXPECT_NE(error_of(upload("carol", id, sha, 0, chunk(0))).find("go on from"), std::string::npos);
  EXPECT_NE(error_of(upload("carol", id, sha, 2 * kTrainChunkBytes, chunk(2))).find("go on from"), std::string::npos);
  EXPECT_NE(error_of(upload("carol", id, sha, kTrainChunkBytes, chunk(1).substr(1))).find("short chunk"), std::string::npos);
  EXPECT_NE(error_of(upload("mallory", id, sha, kTrainChunkBytes, chunk(1))).find("of yours"), std::string::npos);
  ASSERT_TRUE(upload("carol", id, sha, kTrainChunkBytes, chunk(1)).value("ok", false));
  auto last = upload("carol", id, sha, 2 * kTrainChunkBytes, chunk(2));
  ASSERT_TRUE(last.value("ok", false)) << last.dump();
  EXPECT_EQ(last["remaining"], 0);
  auto row = store->training(id, false).value();
  ASSERT_TRUE(row->round_job);  // all in: round 0 started
  // A worker reads it back by digest, whole or a chunk at a time.
  auto input = store->job_input(*row->round_job).value();
  EXPECT_EQ(input["owner"], "carol");
  for (const auto& f : input["files"])
    if (f["path"] == "data/shard-0/x.npy") {
      EXPECT_FALSE(f.contains("data"));
      EXPECT_EQ(f["sha256"], sha);
    }
  EXPECT_EQ(read_training_file(*store, "carol", sha).value(), big);
  EXPECT_EQ(read_training_chunk(*store, "carol", sha, kTrainChunkBytes).value(), std::string(chunk(1)));
  EXPECT_FALSE(read_training_file(*store, "mallory", sha));  // per owner
}

TEST_F(TrainingDataTest, BytesThatAreNotWhatTheDigestSaysAreDroppedAndSentAgain) {
  const std::string big = bytes_of(kTrainChunkBytes + 5, 'x'), sha = digest(big);
  const std::string id = submit("carol", big)["training"];
  std::string wrong = big;
  wrong[kTrainChunkBytes + 2] ^= 1;
  ASSERT_TRUE(upload("carol", id, sha, 0, std::string_view(wrong).substr(0, kTrainChunkBytes)).value("ok", false));
  EXPECT_NE(error_of(upload("carol", id, sha, kTrainChunkBytes, std::string_view(wrong).substr(kTrainChunkBytes)))
                .find("do not match its digest"),
            std::string::npos);
  EXPECT_EQ(store->training_blob("carol", sha).value()->stored, 0u);  // from 0 again
  ASSERT_TRUE(upload("carol", id, sha, 0, std::string_view(big).substr(0, kTrainChunkBytes)).value("ok", false));
  ASSERT_TRUE(upload("carol", id, sha, kTrainChunkBytes, std::string_view(big).substr(kTrainChunkBytes)).value("ok", false));
  EXPECT_TRUE(store->training(id, false).value()->round_job);
}

TEST_F(TrainingDataTest, TheDataIsBoundedPerTrainingAndPerPool) {
  const json spec = {{"script", "train.py"}, {"workers", 1}, {"rounds", 1}, {"local_steps", 1}};
  auto with_file = [&](std::uint64_t size) {
    const json files = json::array({{{"path", "train.py"}, {"data", base64_encode("x")}},
                                    {{"path", "data/shard-0/x"}, {"sha256", std::string(64, 'a')}, {"size", size}}});
    return json{{"op", "train"}, {"spec", spec}, {"input", {{"files", files}}}, {"weights", base64_encode(weights_file())}};
  };
  EXPECT_NE(error_of(trainer->submit("carol", kT0, with_file(kMaxTrainDataBytes + 1))).find("over 256 MiB"), std::string::npos);
  limits.pool_data_bytes = 10 << 20;
  trainer.emplace(*store, [this](const json& e) { events.push_back(e); }, nullptr, limits);
  ASSERT_TRUE(trainer->submit("carol", kT0, with_file(9 << 20)).value("ok", false));
  EXPECT_NE(error_of(trainer->submit("dave", kT0, with_file(2 << 20))).find("this pool holds"), std::string::npos);
}

TEST_F(TrainingDataTest, AnUploadThatNeverEndsFailsAtItsDeadlineAndItsDataGoes) {
  const std::string big = bytes_of(kTrainChunkBytes + 5, 'q'), sha = digest(big);
  const std::string id = submit("carol", big)["training"];
  ASSERT_TRUE(upload("carol", id, sha, 0, std::string_view(big).substr(0, kTrainChunkBytes)).value("ok", false));
  trainer->tick(kT0 + kUploadDeadlineMs - 1);
  EXPECT_EQ(store->training(id, false).value()->state, "running");
  trainer->tick(kT0 + kUploadDeadlineMs + 1);
  auto row = store->training(id, false).value();
  EXPECT_EQ(row->state, "failed");
  EXPECT_NE(row->reason.find("upload"), std::string::npos);
  EXPECT_EQ(store->training_data_bytes(std::string("carol")).value(), 0u);
  EXPECT_FALSE(store->training_blob("carol", sha).value());
}

TEST_F(TrainingDataTest, ACancelledTrainingsDataGoesButWhatAnotherStillNamesStays) {
  const std::string big = bytes_of(100, 'z');
  const std::string first = submit("carol", big)["training"];
  auto second = submit("carol", big);  // the same files: nothing to upload again
  EXPECT_EQ(second["missing"], json::array({digest(big)}));  // not complete yet: still awaited
  ASSERT_TRUE(upload("carol", first, digest(big), 0, big).value("ok", false));
  ASSERT_TRUE(trainer->cancel("carol", kT0, {{"training", first}}).value("ok", false));
  EXPECT_TRUE(store->training_blob("carol", digest(big)).value());  // the second names it
  ASSERT_TRUE(trainer->cancel("carol", kT0, {{"training", second["training"]}}).value("ok", false));
  EXPECT_FALSE(store->training_blob("carol", digest(big)).value());
  EXPECT_EQ(store->training_data_bytes(std::nullopt).value(), 0u);
}

TEST_F(TrainingDataTest, ADeviceIsOfferedTheShardWhoseDataItKeepsFirst) {
  const std::string id = submit("carol", "tiny")["training"];
  ASSERT_TRUE(upload("carol", id, digest("tiny"), 0, "tiny").value("ok", false));
  ASSERT_TRUE(store->training(id, false).value()->round_job);
  const std::string job = *store->training(id, false).value()->round_job;
  auto dev = registered(*store, "wendy", "cpu", "w", 1.0, 0.0, kT0).value();
  auto got = store->claim_many(dev, "wendy", kT0, 1, std::nullopt, "*", std::int64_t{1}).value();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].job, job);
  EXPECT_EQ(got[0].shard, 1);  // not the lowest pending one
  auto rest = store->claim_many(dev, "wendy", kT0, 1, job, "*", std::int64_t{1}).value();
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].shard, 0);  // taken: the others as before
}

TEST_F(TrainingDataTest, ARefusedSubmitLeavesNothingThatHoldsTheNextOne) {
  const std::string big = bytes_of(100, 'r');
  const json files = json::array({{{"path", "train.py"}, {"data", base64_encode("x")}},
                                  {{"path", "data/shard-0/x"}, {"sha256", digest(big)}, {"size", big.size()}}});
  const json spec = {{"script", "train.py"}, {"workers", 1}, {"rounds", 1}, {"local_steps", 1}};
  // A budget past the balance: refused after its files were registered.
  const json broke = {{"op", "train"}, {"spec", spec}, {"input", {{"files", files}}},
                      {"weights", base64_encode(weights_file())}, {"budget", 1}};
  EXPECT_NE(error_of(trainer->submit("carol", kT0, broke)).find("not enough credit"), std::string::npos);
  EXPECT_EQ(store->incomplete_training_blobs("carol").value(), 0);
  EXPECT_EQ(store->training_data_bytes(std::string("carol")).value(), 0u);
  // The next training of hers starts as soon as its own files are in.
  const std::string id = submit("carol", "tiny")["training"];
  ASSERT_TRUE(upload("carol", id, digest("tiny"), 0, "tiny").value("ok", false));
  EXPECT_TRUE(store->training(id, false).value()->round_job);
}

}  // namespace
}  // namespace runsnack::pool
