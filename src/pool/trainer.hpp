#pragma once
// Training jobs on the pool (issue 38): data-parallel local SGD in rounds, the
// DiLoCo scheme. A training holds the user's script, the data split into one shard
// per worker, and the weights; each round is a job of the workload "train-round"
// (workloads/train_round.hpp), one task per shard, that every device runs from the
// round's weights for --local-steps steps. When a round's job ends the trainer:
//   - takes the accepted updates (each was checked before it was paid: layout, finite
//     values, delta norm against the last round's median; a rejected one is not paid
//     and counts against its device, and its shard runs again elsewhere);
//   - refuses, from the average, deltas above kDefaultMaxNormOverMedian x this round's
//     median (training/update_check.hpp), clips and averages the rest weighted by the
//     samples each trained on (training/robust_average.hpp);
//   - applies the outer optimizer (Nesterov momentum, training/outer_optimizer.hpp);
//   - stores the new weights, the momentum and the round's metrics, and starts the
//     next round.
// A shard whose script fails (crash, NaN) runs again elsewhere; one that fails everywhere,
// hangs, or is still out when the round's --round-timeout passes does not stop the round: it
// closes with the updates that came (their samples weigh them). A round with none fails the
// training. Everything lives in the store: a
// restarted coordinator resumes at the running round, or starts the next.
//
// Client ops ("pool-client", wire.hpp): train, train_status, train_result,
// train_cancel. Not thread-safe: the coordinator's executor calls it.

#include "pool/pool_store.hpp"
#include "pool/training_data.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>

namespace runsnack::pool {

// What a training's submitter chose (`pool submit POOL train ...`).
struct TrainingSpec {
  std::string script;
  std::int64_t workers = 1;  // data shards, tasks a round
  std::int64_t rounds = 1;
  std::int64_t local_steps = 1;
  std::int64_t seed = 1;
  double outer_lr = 0.7;
  double outer_momentum = 0.9;
  bool nesterov = true;
  // Least share of updates re-run on another device and compared (all of a device the trust
  // policy does not trust yet: scheduling/trust_policy.hpp).
  double check_fraction = 0.1;
  // A round still running this long after it started closes with the updates that came: a hung or
  // lost shard does not hold the training (its lease would keep it until the worker's task timeout).
  std::int64_t round_timeout_s = 600;

  static Result<TrainingSpec> parse(const nlohmann::json& spec);
  nlohmann::json to_json() const;
};

// Trainings a status lists, at most.
inline constexpr std::int64_t kMaxTrainingsListed = 100;

// What one submitter, and one tick, may make the trainer hold or look at.
struct TrainerLimits {
  std::int64_t per_tick = 100;          // trainings a tick looks at, in turn (the next tick goes on from there)
  std::int64_t running_per_owner = 4;   // trainings one submitter may have running at once
  std::uint64_t pool_data_bytes = kMaxPoolTrainDataBytes;  // every training's files together
};

class Trainer {
 public:
  // `forget_job`: what the coordinator keeps in memory of a job the trainer ended (a round closed
  // at its deadline: held copies, checkers).
  Trainer(PoolStore& store, std::function<void(const nlohmann::json&)> on_event,
          std::function<void(const std::string&)> forget_job = {}, TrainerLimits limits = {});

  // "train": spec (TrainingSpec), input {"files":[{"path", "sha256", "size"} or {"path","data"}]}
  // (the script, any .py beside it, data/shard-<i>/... for every shard), weights (base64
  // safetensors), budget?. Answers "missing": the digests to upload before its first round.
  nlohmann::json submit(const std::string& peer, std::int64_t now_ms, const nlohmann::json& req);
  // "train_upload": training, sha256, offset, data (base64): one chunk (training_data.hpp).
  nlohmann::json upload(const std::string& peer, std::int64_t now_ms, const nlohmann::json& req);
  // "train_status": training? (else the peer's), each with its rounds' metrics.
  nlohmann::json status(const std::string& peer, const nlohmann::json& req);
  // "train_result": the training's status and its weights after the rounds finished so far.
  nlohmann::json result(const std::string& peer, const nlohmann::json& req);
  // "train_cancel": stops it (and its running round); its weights so far stay readable.
  nlohmann::json cancel(const std::string& peer, std::int64_t now_ms, const nlohmann::json& req);

  // Moves running trainings on (at most limits.per_tick, in turn): starts a round's job, closes a
  // finished round.
  void tick(std::int64_t now_ms);
  // The same right after a worker's result (the round it ended starts the next at once), when a
  // training may be running: a pool without any pays nothing for it.
  void nudge(std::int64_t now_ms) {
    if (any_running_) tick(now_ms);
  }

 private:
  void advance(const std::string& id, std::int64_t now_ms);
  // A training awaiting its files: ready when they are all in, failed past the upload deadline.
  // Returns whether it may go on to its rounds.
  bool data_ready(const TrainingRow& t, std::int64_t now_ms);
  void end(const TrainingRow& t, const std::string& state, const std::string& why, std::int64_t now_ms);
  void forget_data(const std::string& owner);  // the files none of the owner's running trainings names
  Result<void> start_round(const TrainingRow& t, const TrainingSpec& spec, std::int64_t now_ms);
  Result<void> close_round(const TrainingRow& t, const TrainingSpec& spec, const JobStatus& job, std::int64_t now_ms);
  nlohmann::json status_json(const TrainingRow& t);

  PoolStore& store_;
  std::function<void(const nlohmann::json&)> on_event_;
  std::function<void(const std::string&)> forget_job_;
  TrainerLimits limits_;
  std::string next_after_;   // the last training a tick looked at: the next goes on after it
  bool any_running_ = true;  // as the last tick found (unknown at start)
};

}  // namespace runsnack::pool
