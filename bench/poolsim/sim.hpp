#pragma once
// poolsim's discrete-event simulation: the world of model.hpp, one Policy
// deciding, and the real TrustPolicy and quorum from pool/scheduling doing
// verification the same way for every policy.
//
// Flow, as in the coordinator: an idle device asks for work (it polls); the
// policy answers run / backup / wait (with a retry time). A running copy
// ends in a result, a failure, or is lost when its device leaves (noticed
// at once when the stream closes, otherwise at lease expiry). The first
// result of a task cancels its other copies. The trust policy decides
// whether a result needs a replica on an independent device (another peer
// and network), which new devices get hidden known-answer tasks, audits a
// device's unchecked results when it is caught, and excludes cheaters.

#include "model.hpp"
#include "policy.hpp"

#include <cstdint>
#include <string>

namespace poolsim {

struct Metrics {
  std::string policy;
  double makespan_s = 0;          // measured batch: submission to last task accepted
  double available_s = 0;         // device-seconds online within the makespan
  double total_s = 0;             // all compute of the measured batch (below add up to this)
  double useful_s = 0;            //   the one accepted primary run of each task
  double verification_s = 0;      //   replicas, tie breaks, audits, known-answer tasks
  double lost_s = 0;              //   failed runs and runs lost with their device
  double duplicate_s = 0;         //   backup copies and cancelled or superseded copies
  double cost = 0;                // $ of all compute (price x time)
  double paid = 0;                // $ of runs whose result was used or verified valid
  std::int64_t tasks = 0, backups = 0, lost_runs = 0, failed_runs = 0, replicas = 0, known_answer_tasks = 0;
  std::int64_t tie_breaks = 0, audits = 0;
  double replica_s = 0, known_answer_s = 0, tie_break_s = 0, audit_s = 0;  // verification_s by kind
  double check_s = 0;             //   and the coordinator's checks by computation (render pixels, Freivalds)
  std::int64_t wrong_accepted_by_workload[kWorkloads] = {};
  std::int64_t wrong_returned = 0, wrong_caught = 0, wrong_accepted = 0;
  // The same for devices that had no record when they started cheating (new ones).
  std::int64_t new_wrong_returned = 0, new_wrong_accepted = 0;
  std::int64_t cheaters = 0, cheaters_excluded = 0, honest_excluded = 0;
  std::int64_t new_cheaters = 0, new_cheaters_excluded = 0;  // cheaters that had no record
  std::int64_t decisions = 0;
  double decide_mean_us = 0, decide_p50_us = 0, decide_p99_us = 0, decide_max_us = 0;  // wall-clock per decide()
  int devices_online_at_start = 0;
  bool finished = true;           // false when the time limit cut the batch short

  double utilisation() const { return available_s > 0 ? useful_s / available_s : 0; }
  double busy_share() const { return available_s > 0 ? total_s / available_s : 0; }
  double verification_share() const { return total_s > 0 ? verification_s / total_s : 0; }
  double wasted_share() const { return total_s > 0 ? (lost_s + duplicate_s) / total_s : 0; }
};

Metrics simulate(const WorldConfig& config, Policy& policy);

}  // namespace poolsim
