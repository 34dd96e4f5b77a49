#pragma once
// The dashboard's picture of a pool (docs/DASHBOARD.md), read from the store
// as JSON:
//   {"time": ms,
//    "devices": [{"id","peer","kind","name","score","price","online","tasks_done",
//                 "earnings":"1.5","reliability":0.97|null}],
//    "jobs":    [{"job","owner","state","reason","workload","tasks","pending","running",
//                 "done","failed","budget","credits_spent"[, "image":{"width","height"}]}],
//    "trainings": [{"training","owner","state","reason","rounds_done","rounds","workers",
//                   "curve":[{"round","loss","accuracy"}] (the newest kCurveRounds rounds)}],
//    "ledger":  {"audit_ok","audit_problems":[..],"transactions","entries",
//                "totals":{"minted","escrowed","paid","refunded","held"},
//                "recent":[{"txn","time","account","amount","kind","task","job"}]}}
// Amounts are credits as text ("12.5"), like the CLI. A job's spec is not
// shown (commands may hold secrets) except its "image" size, which a render
// job declares so the page can size its live preview.
//
// Reliability: the share of a device's results accepted (task_done) among
// those it returned (task_done, task_failed, result_rejected), counted from
// the coordinator's events since this process started; null before the
// first. The audit, a whole-ledger scan, is re-run at most every audit_every.
//
// Not thread-safe; uses the store from the coordinator's executor.

#include "pool/pool_store.hpp"

#include <chrono>
#include <map>
#include <optional>

namespace runsnack::pool {

// Rounds of a training's curves a snapshot carries (the newest).
inline constexpr std::size_t kCurveRounds = 500;

struct SnapshotLimits {
  std::int64_t jobs = 20;            // the newest
  std::int64_t ledger_entries = 30;  // the newest
  std::chrono::milliseconds audit_every{5000};
};

class PoolSnapshot {
 public:
  explicit PoolSnapshot(PoolStore& store, SnapshotLimits limits = {});

  // Feeds one coordinator event (for reliability).
  void observe(const nlohmann::json& event);
  Result<nlohmann::json> build(std::int64_t now_ms);

 private:
  struct Returned {
    std::int64_t accepted = 0, failed = 0;
  };
  Result<nlohmann::json> ledger_json(std::int64_t now_ms);

  PoolStore& store_;
  SnapshotLimits limits_;
  std::map<std::string, Returned> by_peer_;
  std::optional<AuditReport> audit_;
  std::int64_t audit_at_ms_ = 0;
};

}  // namespace runsnack::pool
