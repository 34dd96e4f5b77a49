#pragma once
// The pool worker (`runsnack pool join`): connects by the join link,
// registers its device with a calibration score, pulls tasks under leases,
// runs each exec shard in the sandbox, and returns results signed with its
// identity key. After a network loss it reconnects and first re-sends the
// results it finished meanwhile (the coordinator accepts those whose lease
// is still live). A refused link (revoked, expired) ends the worker.
//
// Test-only faults: RUNSNACK_POOL_FAULT=bad-signature|malformed makes every
// result invalid, so tests can check the coordinator refuses it;
// flip-bits signs wrong results (a cheater), for the verification tests;
// exit-3 reports every task as exited with code 3 without running it (a
// saboteur: it must earn nothing and its shards run elsewhere);
// mistyped first sends messages with fields of the wrong type, each of which
// the coordinator must refuse without closing the stream.

#include "consumer/consumer.hpp"
#include "crypto/identity.hpp"
#include "pool/calibration.hpp"
#include "link/link.hpp"
#include "pool/workload.hpp"

#include <boost/asio/awaitable.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace runsnack::pool {

struct WorkerOptions {
  Link link;
  double price = 10;            // credits per device-hour
  std::int64_t max_tasks = 0;   // 0: unlimited; else exit after this many accepted results
  std::filesystem::path work_dir;
  std::vector<std::filesystem::path> hidden;  // kept out of the sandbox
  std::string fault;            // test-only, see above
  TaskLimits limits;            // per task; limits.gpus are the devices offered
  std::string device_kind = "cpu", device_name = "cpu";
  double score = 0;             // 0: calibrate at start
  std::optional<std::int64_t> max_task_seconds;  // pool join --max-task-seconds (device_runs.hpp)
};

// Returns the process exit code.
boost::asio::awaitable<int> run_worker(Consumer* consumer, const Identity* identity, WorkerOptions options);

}  // namespace runsnack::pool
