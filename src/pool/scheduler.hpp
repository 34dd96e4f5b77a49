#pragma once
// The pool's scheduling and lease policy as pure functions (docs/ARCHITECTURE.md section 13, rule 3):
// no I/O, no clock of its own; the coordinator feeds them the waiting devices,
// the pending count and the current time. Part 2 replaces the policy behind
// these functions (price, reliability, exploration).

#include "core/clock.hpp"

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace runsnack::pool {

// A device that asked for work and holds no lease.
struct WaitingDevice {
  std::string id;
  double score = 0;       // calibration ops/s; higher is faster
  TimePoint since{};      // when it started waiting (earlier wins ties)
};

// Fastest free device first: of the waiting devices, the `pending` fastest
// get a task now (ties: the one waiting longest, then by id). Returns their ids.
std::vector<std::string> assign_fastest_first(std::vector<WaitingDevice> waiting, std::size_t pending);

// Whether `device` (one of `waiting`) may take a task now.
bool may_claim(const std::string& device, const std::vector<WaitingDevice>& waiting, std::size_t pending);

// What to do with a task whose attempt ended without an accepted result.
enum class RetryDecision { requeue, fail };

// `attempts` counts every lease given so far (the one that just ended included).
RetryDecision after_lost_attempt(int attempts, int max_attempts);

// A lease expires when its deadline passes without a heartbeat renewing it.
bool lease_expired(TimePoint deadline, TimePoint now);
TimePoint lease_deadline(TimePoint now, std::chrono::milliseconds lease);

}  // namespace runsnack::pool
