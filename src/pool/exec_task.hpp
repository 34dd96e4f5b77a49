#pragma once
// The exec workload on the worker's side: one shard runs the user's command
// in the `runsnack run` sandbox (sandbox/sandbox.hpp) in a fresh
// folder holding the job's inputs, with {shard}/{shards} substituted and
// RUNSNACK_SHARD/RUNSNACK_SHARDS set; stdout and the files under out/ come
// back, size-bounded (pool/wire.hpp).

#include "core/error.hpp"
#include "pool/workload.hpp"

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace runsnack::pool {

// "{shard}" and "{shards}" replaced in every argument. Pure.
std::vector<std::string> substitute_shard(const std::vector<std::string>& argv, std::int64_t shard, std::int64_t shards);

struct ExecTaskRequest {
  std::vector<std::string> argv;  // already substituted
  std::int64_t shard = 0, shards = 1;
  std::filesystem::path input_dir;  // copied into the workspace (may not exist)
  std::filesystem::path task_dir;   // created; removed afterwards by the caller
  std::vector<std::filesystem::path> hidden;
  std::chrono::milliseconds timeout{600000};
  TaskLimits limits;
};

// Runs the shard in a cgroup of its own with the worker's limits (rlimits
// where no cgroup can be made, as for `runsnack run`); `tick` is called
// about every second while it runs (the worker heartbeats from there), and
// its false stops the shard (errc::closed).
// Errors: the sandbox could not start, the timeout passed (everything it
// started is killed), the coordinator stopped it, or the outputs are over their limits.
boost::asio::awaitable<Result<TaskOutput>> run_exec_task(ExecTaskRequest request,
                                                             std::function<boost::asio::awaitable<bool>()> tick);

}  // namespace runsnack::pool
