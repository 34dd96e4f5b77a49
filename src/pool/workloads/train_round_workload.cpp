// train-round: one round of a training job (pool/trainer.hpp) on one data shard. The trainer
// makes these jobs, one a round, a task per shard; nobody submits them. The worker runs the
// user's script in the `runsnack run` sandbox (exec_task.hpp) with the contract of
// examples/train/runsnack_train.py in its environment; the script leaves its weights in
// out/weights.safetensors and prints a JSON line of metrics last. The coordinator checks each
// update before it is accepted and paid (training/update_check.hpp): the layout of the round's
// weights, finite values, and a delta no larger than kDefaultMaxNormOverMedian x the median of
// the previous round's.
#include "core/json_fields.hpp"
#include "pool/exec_task.hpp"
#include "pool/training/update_check.hpp"
#include "pool/training/weights.hpp"
#include "pool/wire.hpp"
#include "pool/workloads/builtin.hpp"
#include "pool/workloads/train_round.hpp"

#include <cmath>

namespace runsnack::pool {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// The update's file in a result: its bytes, from base64 or a binary frame.
Result<std::string> update_bytes(const TaskResult& result) {
  for (const auto& f : result.files) {
    if (!f.is_object() || string_or(f, "path") != kRoundWeightsOut) continue;
    if (f.contains("frame")) {
      const auto i = int_or(f, "frame", -1);
      if (i < 0 || static_cast<std::size_t>(i) >= result.frames.size()) return fail(errc::malformed, "a frame it does not hold");
      return result.frames[static_cast<std::size_t>(i)];
    }
    return base64_decode(string_or(f, "data"));
  }
  return fail(errc::malformed, std::string("no ") + kRoundWeightsOut + " (the script must write RUNSNACK_WEIGHTS_OUT)");
}

class TrainRoundChecker final : public ResultChecker {
 public:
  TrainRoundChecker(training::Weights reference, double median, std::uint64_t max_bytes)
      : reference_(std::move(reference)), median_(median), max_bytes_(max_bytes) {}

  Verdict check(std::int64_t, const TaskResult& result) override {
    if (result.exit_code != 0) return {true, "", 0, false};  // a failed shard: not an update (shard_failed's business)
    auto update = parse_update(result, max_bytes_);
    if (!update) return {false, update.error().what(), 0};
    auto norm = training::update_norm(reference_, *update);
    if (!norm) return {false, norm.error().what(), 0};
    if (median_ > 0)
      if (auto ok = training::check_norm(*norm, median_); !ok)
        return {false, ok.error().what() + " (the last round's median)", 0};
    return {true, "", 0, false};  // screened, not proven: a re-run proves it (replication.hpp)
  }

 private:
  training::Weights reference_;
  double median_;
  std::uint64_t max_bytes_;
};

class TrainRoundWorkload final : public Workload {
 public:
  std::string_view name() const override { return kTrainRoundWorkload; }

  Result<json> make_spec(const SubmitOptions&, json&) const override {
    return fail(errc::invalid_argument, "train rounds are made by the coordinator: submit `train`");
  }

  Result<JobPlan> plan(const json& spec) const override {
    auto round = parse_round_spec(spec);
    if (!round) return round.error();
    return JobPlan{round->shards, kTrainRoundWorkload, json::object()};
  }

  // A shard's task reads the top-level files (script, modules, weights) and its own shard's data.
  bool input_by_shard() const override { return true; }
  bool input_for_shard(const json&, std::int64_t shard, std::string_view path) const override {
    return !path.starts_with("data/") || path.starts_with(shard_folder(shard) + "/");
  }

  json verification_method(const json& spec) const override {
    return {{"method", "update checks"},
            {"rerun", {{"fraction", number_or(spec, "spot_check", 0.0)},
                       {"tolerance", number_or(spec, "tolerance", training::kDefaultRerunTolerance)},
                       {"compare", "relative distance of the two deltas"}}},
            {"checks", "same tensors and shapes as the round's weights, finite values, delta norm at most " +
                           std::to_string(static_cast<int>(training::kDefaultMaxNormOverMedian)) +
                           "x the last round's median"},
            {"median_norm", number_or(spec, "median_norm", 0.0)}};
  }

  boost::asio::awaitable<Result<TaskOutput>> run(TaskWork work) const override {
    auto round = parse_round_spec(work.spec);
    if (!round) co_return round.error();
    ExecTaskRequest req;
    req.shard = work.index;
    req.shards = work.count;
    // out/ first (the script writes its weights there), then the script with the contract's variables.
    req.argv = {"sh", "-c", "mkdir -p out && exec \"$@\"", "sh", "env",
                std::string("RUNSNACK_WEIGHTS_IN=") + kRoundWeightsIn,
                std::string("RUNSNACK_WEIGHTS_OUT=out/") + kRoundWeightsOut,
                "RUNSNACK_DATA_DIR=" + shard_folder(work.index),
                "RUNSNACK_STEPS=" + std::to_string(round->local_steps),
                "RUNSNACK_SEED=" + std::to_string(shard_seed(round->seed, work.index)),
                "RUNSNACK_ROUND=" + std::to_string(round->round),
                "python3", round->script};
    req.input_dir = work.input_dir;
    req.task_dir = work.task_dir;
    req.hidden = work.hidden;
    req.limits = work.limits;
    req.timeout = work.limits.timeout;
    auto running = run_exec_task(std::move(req), work.tick);
    auto out = co_await std::move(running);
    // The weights go back raw in a binary frame (wire.hpp), not as base64: a third fewer bytes a round.
    if (out)
      for (auto& f : out->files)
        if (string_or(f, "path") == kRoundWeightsOut && f.contains("data"))
          if (auto raw = base64_decode(string_or(f, "data"))) {
            f.erase("data");
            f["frame"] = out->frames.size();
            out->frames.push_back(std::move(*raw));
          }
    co_return out;
  }

  Result<std::unique_ptr<ResultChecker>> checker(const json& spec, const json& input) const override {
    auto round = parse_round_spec(spec);
    if (!round) return round.error();
    auto reference = round_weights(input, round->max_weights_bytes);
    if (!reference) return reference.error();
    return std::unique_ptr<ResultChecker>(
        std::make_unique<TrainRoundChecker>(std::move(*reference), round->median_norm, round->max_weights_bytes));
  }

  // A re-run of the same shard (same weights, data, seed and steps) agrees when the two deltas are
  // within the round's tolerance: a sign-flipped, random or scaled update does not, honest rounding does.
  Result<Agreement> agreement(const json& spec, const json& input) const override {
    auto round = parse_round_spec(spec);
    if (!round) return round.error();
    auto reference = round_weights(input, round->max_weights_bytes);
    if (!reference) return reference.error();
    auto shared = std::make_shared<const training::Weights>(std::move(*reference));
    const std::uint64_t max = round->max_weights_bytes;
    const double tolerance = round->tolerance;
    return Agreement([shared, max, tolerance](const TaskResult& a, const TaskResult& b) {
      if (a.exit_code != b.exit_code) return false;
      if (a.exit_code != 0) return true;  // both failed: the shard's failure, agreed on
      auto ua = parse_update(a, max), ub = parse_update(b, max);
      if (!ua || !ub) return false;
      auto distance = training::rerun_distance(*shared, *ua, *ub);
      return distance && *distance <= tolerance;
    });
  }

  Result<json> merge(const json&, std::int64_t, const fs::path&, const fs::path&) const override {
    return fail(errc::unsupported, "a train round is averaged by the coordinator, not merged by the submitter");
  }
};

}  // namespace

Result<RoundSpec> parse_round_spec(const json& spec) {
  if (!spec.is_object()) return fail(errc::invalid_argument, "a train round's spec must be an object");
  RoundSpec r;
  r.script = string_or(spec, "script");
  r.round = int_or(spec, "round", -1);
  r.shards = int_or(spec, "shards", 0);
  r.local_steps = int_or(spec, "local_steps", 0);
  r.seed = int_or(spec, "seed", -1);
  r.median_norm = number_or(spec, "median_norm", 0.0);
  r.max_weights_bytes = static_cast<std::uint64_t>(int_or(spec, "max_weights_bytes", 0));
  r.spot_check = number_or(spec, "spot_check", 0.0);
  r.tolerance = number_or(spec, "tolerance", training::kDefaultRerunTolerance);
  const bool plain_name = !r.script.empty() && r.script.size() <= 200 && r.script.front() != '.' &&
                          r.script.find('/') == std::string::npos && r.script.front() != '-';
  if (!plain_name) return fail(errc::invalid_argument, "a train round's script must be a plain file name");
  if (r.round < 0 || r.round >= kMaxRounds) return fail(errc::invalid_argument, "round out of range");
  if (r.shards < 1 || r.shards > kMaxTrainShards) return fail(errc::invalid_argument, "shards out of range");
  if (r.local_steps < 1 || r.local_steps > kMaxLocalSteps) return fail(errc::invalid_argument, "local_steps out of range");
  if (r.seed < 0 || r.seed > kMaxSeed) return fail(errc::invalid_argument, "seed out of range");
  if (!(r.median_norm >= 0) || !std::isfinite(r.median_norm)) return fail(errc::invalid_argument, "bad median_norm");
  if (!(r.spot_check >= 0 && r.spot_check <= 1)) return fail(errc::invalid_argument, "spot_check must be in [0, 1]");
  if (!(r.tolerance > 0 && r.tolerance <= 1)) return fail(errc::invalid_argument, "tolerance must be in (0, 1]");
  if (r.max_weights_bytes < 1 || r.max_weights_bytes > kMaxRoundWeightsBytes)
    return fail(errc::invalid_argument, "max_weights_bytes out of range");
  return r;
}

Result<training::Weights> round_weights(const json& input, std::uint64_t max_bytes) {
  for (const auto& f : field_or(input, "files", json::array())) {
    if (string_or(f, "path") != kRoundWeightsIn) continue;
    auto bytes = base64_decode(string_or(f, "data"));
    if (!bytes) return bytes.error();
    return training::parse_weights(*bytes, max_bytes);
  }
  return fail(errc::malformed, "a train round without its weights");
}

std::string shard_folder(std::int64_t shard) { return "data/shard-" + std::to_string(shard); }

std::int64_t shard_seed(std::int64_t round_seed, std::int64_t shard) { return round_seed * 1000 + shard; }

Result<training::Weights> parse_update(const TaskResult& result, std::uint64_t max_bytes) {
  auto bytes = update_bytes(result);
  if (!bytes) return bytes.error();
  return training::parse_weights(*bytes, max_bytes);
}

std::unique_ptr<Workload> make_train_round_workload() { return std::make_unique<TrainRoundWorkload>(); }

}  // namespace runsnack::pool
