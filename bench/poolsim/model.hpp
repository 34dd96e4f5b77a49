#pragma once
// What poolsim simulates: GPU tiers with prices, devices drawn from them,
// their churn, failures and honesty, and the jobs. Everything is drawn from
// counter-based random streams keyed by the seed and the thing's identity, so
// every policy meets exactly the same pool, the same sessions, the same task
// sizes and the same failures (common random numbers).

#include "pool/scheduling/trust_policy.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace poolsim {

// One 64-bit hash of several keys: the seed of a random stream.
std::uint64_t mix(std::uint64_t a, std::uint64_t b = 0, std::uint64_t c = 0, std::uint64_t d = 0);
// A uniform [0,1) draw from a key.
double unit(std::uint64_t key);

enum Workload : std::uint8_t { kRender = 0, kMatmul = 1, kExec = 2, kWorkloads = 3 };
const char* workload_name(Workload w);

struct Tier {
  const char* name;
  double bench;             // calibration benchmark, GTX 1060 = 1
  double price_per_hour;    // marketplace-like $/h
  double share;             // of the pool
  double factor[kWorkloads];  // real speed per workload relative to the benchmark
  bool datacenter;
};
const std::vector<Tier>& tiers();

struct WorldConfig {
  std::uint64_t seed = 1;
  int devices = 10000;
  int tasks = 100000;          // the measured batch
  int warmup_tasks = 10000;    // run before it through the same policy (learning, trust)
  double warmup_s = 1800;      // the measured batch is submitted at this time
  double cheater_share = 0.03;
  double flaky_share = 0.08;
  double new_share = 0.05;     // initial honest devices with no record yet (the churn below
                               //   alone keeps about 2% of the pool that new)
  double throttled_share = 0.05;
  double session_s = 6 * 3600;       // mean time online, ordinary devices
  double flaky_session_s = 20 * 60;  // and flaky ones
  double offline_s = 30 * 60;        // mean time away before coming back
  double return_share = 0.7;         // leavers that come back (the others are replaced by new devices)
  double replace_s = 10 * 60;        // mean gap before a replacement joins
  double graceful_share = 0.5;       // departures noticed at once (stream closed); others at lease expiry
  double lease_s = 30;
  std::string prefer = "mixed";      // fast | cheap | balanced | mixed (per job)
  double trace_s = 0;                // > 0: print the pool's state to stderr this often
  runsnack::pool::scheduling::TrustConfig trust;  // the verification policy under test (defaults: the coordinator's)
  // Checks by computation, as the coordinator makes them (docs/POOLSIM.md):
  // every render tile has a few pixels re-rendered, every matmul tile passes
  // Freivalds' check; off: they are replicated like exec (the model before).
  bool render_checks = true;
  bool matmul_checks = true;
  double render_catch = 0.998;       // a wrong tile fails its 16-pixel spot check (it differs in a third of its pixels or more)
  double matmul_catch = 0.999;       // Freivalds with 10 rounds: 1 - 2^-10
  double render_check_cost = 0.002;  // the coordinator's time per check, as a share of the task's compute
  double matmul_check_cost = 0.006;
  double exec_spot_check = 0;        // the batch job's --spot-check: least share of its results replicated (none by default)
  // Colluding cheaters: all return the same wrong value for a task, so two on
  // independent networks agree (Sybils on rented hosts; off: each wrong value differs).
  bool colluding = false;
  // A quorum decides only when a party agreeing is vouched for (a record of
  // kVouchChecks valid checks, or one from before the simulation), as the
  // coordinator does since issue 37; off: independent networks suffice (the model before).
  bool vouched_quorums = true;
};
inline constexpr int kVouchChecks = 3;  // pool/replication.hpp kProvenChecks

// One device identity (slot s, identity k: a replacement is a new identity).
struct DeviceSpec {
  std::string id, peer, network;
  int tier = 0;
  double score = 0;            // calibration ops/s as the worker reports it
  double price_per_hour = 0;
  double speed[kWorkloads] = {};  // real work units per second
  double fail_p = 0;           // per attempt
  double session_s = 0;
  bool cheater = false;
  double cheat_p = 0;          // per result, for cheaters
  double silent_error_p = 1e-4;  // honest hardware returning a wrong result
  int history = 0;             // results before the simulation (trust warm start)
};
DeviceSpec device_spec(const WorldConfig& c, int slot, int identity);

struct JobSpec {
  std::string id;
  Workload workload;
  std::string preference;      // fast | cheap | balanced
  int tasks = 0;
  double mean_work = 0;        // work units of a mean task (what the job declares)
  double sigma = 0;            // log-normal spread of task sizes
  double submit_s = 0;
  bool measured = true;
};
std::vector<JobSpec> job_specs(const WorldConfig& c);
// Work of task `index` of job `job` (mean `mean_work`).
double task_work(const WorldConfig& c, int job, int index, const JobSpec& spec);

}  // namespace poolsim
