#pragma once
// The "train-round" workload (train_round_workload.cpp): one round of a training job on one
// data shard, and what the trainer (pool/trainer.hpp) shares with it: the round's spec, where
// a shard's data and the weights lie in the round's folder, and the bounds.
//
// A round's folder on the worker (its job's input, training's files then the round's):
//   <script>                  the user's script (and any .py beside it that it imports)
//   data/shard-<i>/...        shard i's files
//   weights.safetensors       the round's weights (training/weights.hpp)
// and the script leaves out/weights.safetensors.

#include "core/error.hpp"
#include "pool/task_result.hpp"
#include "pool/training/weights.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace runsnack::pool {

inline constexpr const char* kTrainRoundWorkload = "train-round";
inline constexpr const char* kRoundWeightsIn = "weights.safetensors";
inline constexpr const char* kRoundWeightsOut = "weights.safetensors";  // under out/

// Bounds. The weights travel in the round's job input and come back as an out/ file
// (wire.hpp kMaxOutFilesBytes, 5 MiB): 4 MiB, a model of ~1M float32 parameters (a small CNN).
// The script and data are uploaded and fetched in chunks (pool/training_data.hpp): 256 MiB, as
// a worker keeps its shard in its cache of inputs of that size (Fashion-MNIST's 60,000 images
// are 47 MB).
inline constexpr std::uint64_t kMaxRoundWeightsBytes = 4ull << 20;
inline constexpr std::uint64_t kMaxTrainDataBytes = 256ull << 20;
inline constexpr std::int64_t kMaxRounds = 10'000;
inline constexpr std::int64_t kMaxTrainShards = 64;
inline constexpr std::int64_t kMaxLocalSteps = 1'000'000;
inline constexpr std::int64_t kMaxSeed = 1'000'000'000'000;

struct RoundSpec {
  std::string script;                // a plain file name in the round's folder
  std::int64_t round = 0;            // from 0
  std::int64_t shards = 1;           // tasks: one per shard
  std::int64_t local_steps = 1;
  std::int64_t seed = 0;             // the round's; a shard's is shard_seed(seed, shard)
  double median_norm = 0;            // the last round's median update norm (0: none yet)
  double spot_check = 0;             // least share of updates re-run on another device (replication.hpp)
  double tolerance = 0.05;           // two runs agree within this (training/update_check.hpp rerun_distance)
  std::uint64_t max_weights_bytes = kMaxRoundWeightsBytes;
};

// A round job's spec, checked (as the coordinator and the worker read it).
Result<RoundSpec> parse_round_spec(const nlohmann::json& spec);
// "data/shard-<i>": shard i's folder, relative to the round's folder.
std::string shard_folder(std::int64_t shard);
// The seed shard `shard` runs with (RUNSNACK_SEED): a re-run of the same round and shard gets the same.
std::int64_t shard_seed(std::int64_t round_seed, std::int64_t shard);
// The round's weights, from its job's own input (not the training's files it is joined to).
Result<training::Weights> round_weights(const nlohmann::json& input, std::uint64_t max_bytes);
// The weights a result returns (its out/weights.safetensors), parsed within `max_bytes`.
Result<training::Weights> parse_update(const TaskResult& result, std::uint64_t max_bytes);

}  // namespace runsnack::pool
