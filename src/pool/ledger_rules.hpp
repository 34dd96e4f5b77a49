#pragma once
// The credit ledger's rules as pure functions: amounts, the price of one
// accepted task, and the audit of a whole ledger (docs/ARCHITECTURE.md section 7).
//
// Amounts are integers in micro-credits (no rounding drift). Accounts:
//   "peer:<PeerId>"  a participant (consumer or provider), never negative
//   "escrow:<job>"   a job's budget while it runs, never negative
//   "mint"           the bank: the only account that may go negative
//                    (starting credits are explicit minting entries)
// Every transaction's entries sum to zero (double entry). A payment to a
// provider ("payment" entries) names the task it pays for; a task is paid
// at most once.

#include "core/error.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace runsnack::pool {

using Micro = std::int64_t;
inline constexpr Micro kMicroPerCredit = 1'000'000;
// The most one account may hold, and the most ever minted in one pool: far
// below the 64-bit sums the store keeps, so no grant can overflow them.
inline constexpr Micro kMaxBalance = 1'000'000'000'000 * kMicroPerCredit;
inline constexpr Micro kMaxMinted = 4 * kMaxBalance;
inline constexpr const char* kMintAccount = "mint";
// The calibration score a device needs for its price to count at face value:
// a faster device earns more per second, so the same work costs about the same.
inline constexpr double kReferenceScore = 50'000'000.0;  // ops/s of the calibration loop

std::string peer_account(const std::string& peer);
std::string escrow_account(const std::string& job);

// "12", "0.5" -> micro-credits; negative or malformed is an error.
Result<Micro> parse_credits(const std::string& text);
std::string format_credits(Micro amount);  // "12.5"

// The price of one accepted task: `price_per_hour` credits per device-hour
// times the run time, scaled by score / kReferenceScore (clamped to 0.1..10),
// at least one micro-credit when the price is positive, never above
// `escrow_left`.
Micro task_charge(double price_per_hour, double score, std::chrono::milliseconds run_time, Micro escrow_left);

struct LedgerEntry {
  std::int64_t txn = 0;
  std::string account;
  Micro amount = 0;
  std::string kind;                 // "mint", "escrow", "payment", "refund"
  std::optional<std::string> task;  // required for "payment"
};

struct AuditReport {
  bool ok = true;
  std::int64_t transactions = 0;
  std::int64_t entries = 0;
  Micro minted = 0;
  std::vector<std::string> problems;  // empty when ok
};

// The terms an accepted attempt was leased at, and how long it ran.
struct PaidTerms {
  double price_per_hour = 0;  // the device's price when the lease was given
  double score = 0;           // its measured score then
  std::chrono::milliseconds run_time{0};  // the time it is paid for (lease start to the accepted result before)
  // The device and the span of its time the result was paid for (results
  // accepted since payments stopped overlapping: none before).
  std::string device;
  std::optional<std::pair<std::int64_t, std::int64_t>> paid_span;
};

// Checks every invariant. `task_finisher` maps each done task to the PeerId
// whose result was accepted: a payment must go to exactly that peer, once,
// and (for tasks in `terms`) never more than task_charge() of its lease's
// terms for its run time; a device's paid spans never overlap.
AuditReport audit_ledger(std::span<const LedgerEntry> entries, const std::map<std::string, std::string>& task_finisher,
                         const std::map<std::string, PaidTerms>& terms = {});

}  // namespace runsnack::pool
