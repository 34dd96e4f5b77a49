#pragma once
// What the coordinator tells the scheduler and what it gets back
// (pool/scheduling/scheduler.hpp). Times are seconds on any fixed origin the
// caller keeps (e.g. unix seconds); work is in whatever unit a workload
// declares for its tasks, as long as one workload always uses the same one.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace runsnack::pool::scheduling {

// A job's stated preference (`--prefer`): which point of the Pareto front
// (completion time, price, reliability) its tasks should go to.
enum class Preference { fast, cheap, balanced };
std::optional<Preference> parse_preference(std::string_view s);
std::string_view to_string(Preference p);

// How one attempt of a task on one device ended.
enum class Outcome {
  ok,         // a result came back (its verdict may follow, Scheduler::verdict)
  failed,     // the worker reported an error
  invalid,    // the result was checked at once (e.g. Freivalds) and is wrong
  lost,       // its lease expired with the device still there (counts against its reliability;
              //   for a device that went away call Scheduler::device_left instead)
  cancelled,  // the coordinator withdrew this copy (another copy won): no blame
};
std::optional<Outcome> parse_outcome(std::string_view s);
std::string_view to_string(Outcome o);

struct DeviceProfile {
  std::string id;              // the pool's device id, unique
  std::string peer;            // PeerId of the worker that owns it
  std::string network;         // network prefix, e.g. "203.0.113.0/24"
  double score = 0;            // calibration ops/s, > 0; higher is faster
  double price_per_hour = 0;   // credits per hour of work, >= 0
};

// A job with tasks waiting for a device, as the store sees it now. `pending`
// counts only tasks this device may run (a replica is not for its own peer).
struct PendingJob {
  std::string id;
  std::string workload;
  Preference preference = Preference::balanced;
  std::int64_t pending = 0;
  double typical_work = 1;     // work of a typical task of this job, > 0
};

struct TaskStart {
  std::string task;            // one id for all copies of a task (backups too)
  std::string device;
  std::string job;             // empty for hidden known-answer tasks: no backups
  std::string workload;
  Preference preference = Preference::balanced;  // the job's
  double expected_work = 1;    // what the job said a task weighs, > 0
};

struct TaskEnd {
  std::string task;
  std::string device;
  Outcome outcome = Outcome::ok;
  double elapsed_s = -1;       // measured run time; < 0: now minus the start
};

struct Decision {
  enum class Kind { run, backup, wait };
  Kind kind = Kind::wait;
  std::string job;             // run: claim a pending task of this job
  std::string task;            // backup: start another copy of this running task
  double expected_s = 0;       // run, backup: estimated seconds on this device
  double retry_after_s = 0;    // wait: ask again after this long
};

}  // namespace runsnack::pool::scheduling
