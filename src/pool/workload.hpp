#pragma once
// A pool workload: the four things the coordinator, the workers and the
// submitter need to know of a kind of job (docs/ARCHITECTURE.md section 7):
//   plan    (coordinator, at submit) check the spec, say how many tasks
//   run     (worker) compute one task into stdout and files
//   checker (coordinator) verify a task's result before it is accepted and
//           paid, when the workload can (matmul: Freivalds)
//   merge   (submitter) turn the collected task results into the output
// The coordinator, the store and the worker loop never look inside a spec:
// adding a workload is adding one of these (workloads/ holds them).

#include "core/error.hpp"
#include "pool/pool_store.hpp"

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace runsnack::pool {

struct JobPlan {
  std::int64_t tasks = 0;
  // What a device must be able to run to take the job's tasks, matched
  // against what a device says it runs (DeviceRuns); '' = the workload's name.
  std::string needs;
  nlohmann::json info = nlohmann::json::object();  // shown with the job (e.g. the image size)
};

// What a worker allows one task (pool join --memory/--max-procs/--task-timeout, --gpu).
struct TaskLimits {
  std::optional<std::uint64_t> memory_bytes;
  std::uint64_t max_procs = 512;
  std::chrono::milliseconds timeout{3600 * 1000};
  std::vector<int> gpus;  // the worker's GPUs (device nodes and CUDA_VISIBLE_DEVICES)
};

// One task as the worker runs it.
struct TaskWork {
  nlohmann::json spec;                    // the job's spec, as submitted
  std::int64_t index = 0, count = 1;      // this task's number and the job's task count
  std::filesystem::path input_dir;        // the job's input files (may not exist)
  std::filesystem::path task_dir;         // a fresh folder for this task, removed afterwards
  std::vector<std::filesystem::path> hidden;  // kept out of any sandbox
  // Call about every second (heartbeats): false when the coordinator no longer wants the task (its
  // round closed at its deadline, its job was cancelled, its lease went to another device): stop it.
  std::function<boost::asio::awaitable<bool>()> tick;
  TaskLimits limits;
};

struct TaskOutput {
  int exit_code = 0;
  std::string stdout_data;
  std::string stderr_tail;  // when exit_code != 0: the end of stderr (kMaxStderrTailBytes)
  nlohmann::json files = nlohmann::json::array();  // [{"path","data" (base64)} or {"path","frame": i}]
  std::vector<std::string> frames;  // bulk files raw: sent as binary frames, not base64 (wire.hpp)
};

struct Verdict {
  bool accepted = true;
  std::string why;             // when not accepted
  double compute_seconds = 0;  // the task's own compute time, as the result states it (for cost figures)
  // An acceptance that proves the result right (matmul's Freivalds, render's pixels). A
  // screening is not (train-round's layout and norm checks): it does not count as a valid
  // check on the device's record, and the result still goes to replication when its job asks.
  bool conclusive = true;
};

// Checks the results of one job; made once per job on the coordinator, so
// it may keep what every check of that job shares (matrices, vectors).
class ResultChecker {
 public:
  virtual ~ResultChecker() = default;
  virtual Verdict check(std::int64_t index, const TaskResult& result) = 0;
};

// A submitter's options before they become a spec (`pool submit` flags).
struct SubmitOptions {
  std::vector<std::string> command;            // exec: -- CMD ARGS
  std::int64_t shards = 1;                     // exec
  std::string input_dir;                       // exec: --input
  std::string reduce;                          // exec: --reduce, run by the submitter
  int replicas = 1;                            // exec: copies per shard, compared (pool/replication.hpp)
  double spot_check = 0;                       // exec: least share of results re-run elsewhere
  std::int64_t n = 0, block = 0;               // matmul
  std::uint64_t seed = 1;                      // matmul, render
  std::string a_file, b_file;                  // matmul
  std::string scene_file;                      // render
  int width = 1920, height = 1080, tile = 128, overlap = 8, spp = 16, max_depth = 8;  // render
  int rounds = 10;                             // matmul: Freivalds rounds
  double tolerance = 0;                        // matmul: 0 = the workload's default
};

class Workload {
 public:
  virtual ~Workload() = default;
  virtual std::string_view name() const = 0;
  // Submitter: the spec and the input files ({"files":[{"path","data"}]}).
  virtual Result<nlohmann::json> make_spec(const SubmitOptions& options, nlohmann::json& input) const = 0;
  // Coordinator: validates a spec from the network.
  virtual Result<JobPlan> plan(const nlohmann::json& spec) const = 0;
  // Worker.
  virtual boost::asio::awaitable<Result<TaskOutput>> run(TaskWork work) const = 0;
  // Coordinator: nullptr when results cannot be checked by computation.
  virtual Result<std::unique_ptr<ResultChecker>> checker(const nlohmann::json& spec, const nlohmann::json& input) const {
    (void)spec, (void)input;
    return std::unique_ptr<ResultChecker>{};
  }
  // Coordinator (replication.hpp): whether two results of one shard agree; nullptr: bit for bit.
  using Agreement = std::function<bool(const TaskResult&, const TaskResult&)>;
  virtual Result<Agreement> agreement(const nlohmann::json& spec, const nlohmann::json& input) const {
    (void)spec, (void)input;
    return Agreement{};
  }
  // Coordinator and worker: whether task `shard` reads the input file at `path`, when the
  // workload picks files by shard (input_by_shard): a training's worker fetches its shard's
  // data, not every shard's. The worker then places a job's input a shard at a time.
  virtual bool input_by_shard() const { return false; }
  virtual bool input_for_shard(const nlohmann::json& spec, std::int64_t shard, std::string_view path) const {
    (void)spec, (void)shard, (void)path;
    return true;
  }
  // Coordinator: an event to publish when a task's result is accepted (the
  // render preview's tile), or nothing.
  virtual std::optional<nlohmann::json> on_accepted(const nlohmann::json& spec, std::int64_t index,
                                                    const TaskResult& result) const {
    (void)spec, (void)index, (void)result;
    return std::nullopt;
  }
  // Whether the submitter fetches task results at the end (noop: nothing to fetch).
  virtual bool has_results() const { return true; }
  // How results are checked, for the job's "verification" summary.
  virtual nlohmann::json verification_method(const nlohmann::json& spec) const {
    (void)spec;
    return {{"method", "none"}};
  }
  // Submitter: task i's result was written to `shards/shard-<i>/` (stdout
  // and files); writes the job's output under `out` and returns keys for
  // the final `--wait --json` line.
  virtual Result<nlohmann::json> merge(const nlohmann::json& spec, std::int64_t tasks,
                                       const std::filesystem::path& shards, const std::filesystem::path& out) const = 0;
};

// The built-in workloads by name; nullptr when unknown.
const Workload* find_workload(std::string_view name);
std::string workload_names();  // "exec, matmul"

}  // namespace runsnack::pool
