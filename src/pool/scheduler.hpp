#pragma once
// The pool's scheduling and lease policy as pure functions (docs/ARCHITECTURE.md section 13, rule 3):
// no I/O, no clock of its own; the coordinator feeds them the waiting devices,
// the pending count and the current time. Part 2 replaces the policy behind
// these functions (price, reliability, exploration).

#include "core/clock.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
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

// What a device did with the leases it was given: results accepted, leases
// that ended without one (it went away, let the lease lapse, or came back
// without the task). A lost lease is the device's loss, never the task's
// failure: anyone holding a join link can claim and drop, so losses only
// throttle and then exclude the device that lost them (issue 37).
struct LeaseRecord {
  std::int64_t completed = 0, lost = 0;
};

// Leases a device with no result yet may hold (PoolPolicy::first_leases,
// default kFirstLeases); each accepted result adds one, each lost lease takes
// two (as TCP's slow start: a device earns room by finishing work at its own
// pace, whatever speed it claims).
inline constexpr std::int64_t kFirstLeases = 2;
inline constexpr std::int64_t kMostLeases = 128;
// Leases that all devices of one network (/24, /48) without a result yet may
// hold together (PoolPolicy::fresh_leases_per_network): fresh identities are
// free, networks are not.
inline constexpr std::int64_t kFreshLeasesPerNetwork = 8;
// Lost leases forgiven before losing more than completing excludes a device.
inline constexpr std::int64_t kLossesForgiven = 4;

// How many leases a device with this record may hold at once (at least 1).
std::int64_t lease_cap(const LeaseRecord& record, std::int64_t first_leases = kFirstLeases);
// Whether the record excludes the device (it keeps losing its leases).
bool excluded_for_losses(const LeaseRecord& record);
// Results accepted before the failures a device reports count against the
// task whatever else is online (PoolStore::failure_counts).
inline constexpr std::int64_t kRecordResults = 3;

// A lease expires when its deadline passes without a heartbeat renewing it.
bool lease_expired(TimePoint deadline, TimePoint now);
TimePoint lease_deadline(TimePoint now, std::chrono::milliseconds lease);

}  // namespace runsnack::pool
