#pragma once
// Adaptive verification: how much checking a device's results get, learned
// from its record, so that replication costs fall on unproven devices.
//
//  - A device's `run` counts its results accepted in a row (checked valid or
//    accepted unchecked) since its last wrong one.
//  - While run < proving_run, every result is replicated (a second copy on a
//    different peer AND a different network, `independent`); after that, a
//    result is replicated with probability max(min_probability, falloff / run),
//    with falloff 0.5: 1/6 at run 3, 5% at 10, 2.5% at 20, then 1% from run 50
//    on (a device that turns dishonest after a long record is still caught).
//    Falloff 0.5 rather than 1 measured in bench/poolsim: verification 4.5-4.6%
//    of compute instead of 4.9-5.2% on seeds 1-3 (docs/POOLSIM.md).
//  - Any wrong result resets the run to 0 and asks the coordinator to audit
//    the device's results accepted unchecked since its last checked one.
//  - A new device gets `known_answer_tasks` hidden tasks with known results,
//    at random positions among its first `known_answer_window` claims.
//  - `exclude_after_invalid` wrong results in total exclude the device.
//
// Pure and deterministic for a given seed; save()/load() keep the record and
// the generator across a coordinator restart. Unknown devices are treated as
// new. Not thread-safe.

#include "core/error.hpp"
#include "pool/scheduling/rng.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>

namespace runsnack::pool::scheduling {

struct TrustConfig {
  int proving_run = 3;             // results replicated every time until this many in a row are valid
  double falloff = 0.5;            // then replicated with probability falloff / run ...
  double min_probability = 0.01;   // ... but never less than this
  int known_answer_tasks = 1;      // hidden known-answer tasks for a new device
  int known_answer_window = 3;     // placed among its first this-many claims (inside the proving run)
  int exclude_after_invalid = 2;   // wrong results that exclude a device
};

// Where a device runs, for placing replicas on independent ones.
struct Placement {
  std::string peer;
  std::string network;  // e.g. "203.0.113.0/24"
};

// A replica is independent of the original only on another peer and another network.
bool independent(const Placement& a, const Placement& b);

enum class Verdict {
  valid,      // checked (replica quorum, known answer, Freivalds) and right
  invalid,    // checked and wrong
  unchecked,  // accepted without a check
};

class TrustPolicy {
 public:
  explicit TrustPolicy(TrustConfig config = {}, std::uint64_t seed = 1);
  const TrustConfig& config() const { return config_; }

  void device_seen(const std::string& device, const Placement& where);
  // On each claim: whether this claim should get a hidden known-answer task.
  bool known_answer_now(const std::string& device);
  // On each result: whether it needs a replica before it is accepted (a draw).
  bool replicate(const std::string& device);
  double replica_probability(const std::string& device) const;
  // Whether `candidate` may run the replica of a result from `original`.
  bool may_replicate_on(const std::string& original, const std::string& candidate) const;

  struct RecordOutcome {
    bool reset = false;     // a wrong result: the run restarted
    bool audit = false;     // re-check its results accepted unchecked since its last check
    bool excluded = false;  // excluded now (exactly once)
  };
  RecordOutcome record(const std::string& device, Verdict v);
  bool excluded(const std::string& device) const;

  struct Record {
    Placement where;
    std::uint64_t run = 0, valid = 0, invalid = 0, unchecked = 0;
    std::uint32_t claims = 0, known_answers = 0;
    bool excluded = false;
  };
  const Record* find(const std::string& device) const;

  nlohmann::json save() const;
  static Result<TrustPolicy> load(const nlohmann::json& state, TrustConfig config = {});

 private:
  Record& at(const std::string& device);

  TrustConfig config_;
  Rng rng_;
  std::map<std::string, Record> records_;
};

}  // namespace runsnack::pool::scheduling
