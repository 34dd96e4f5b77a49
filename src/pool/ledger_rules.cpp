#include "pool/ledger_rules.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace runsnack::pool {

std::string peer_account(const std::string& peer) { return "peer:" + peer; }
std::string escrow_account(const std::string& job) { return "escrow:" + job; }

Result<Micro> parse_credits(const std::string& text) {
  auto bad = [&] { return fail(errc::invalid_argument, "bad credit amount '" + text + "': expected e.g. 10 or 2.5"); };
  if (text.empty() || text.size() > 18) return bad();
  auto dot = text.find('.');
  std::string whole = text.substr(0, dot);
  std::string frac = dot == std::string::npos ? "" : text.substr(dot + 1);
  if (whole.empty() || frac.size() > 6) return bad();
  if (whole.find_first_not_of("0123456789") != std::string::npos) return bad();
  if (frac.find_first_not_of("0123456789") != std::string::npos) return bad();
  if (dot != std::string::npos && frac.empty()) return bad();
  frac.resize(6, '0');
  if (whole.size() > 12) return bad();
  return std::stoll(whole) * kMicroPerCredit + std::stoll(frac);
}

std::string format_credits(Micro amount) {
  std::string sign = amount < 0 ? "-" : "";
  Micro a = amount < 0 ? -amount : amount;
  std::string frac = std::to_string(a % kMicroPerCredit);
  frac.insert(0, 6 - frac.size(), '0');
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  return sign + std::to_string(a / kMicroPerCredit) + (frac.empty() ? "" : "." + frac);
}

Micro task_charge(double price_per_hour, double score, std::chrono::milliseconds run_time, Micro escrow_left) {
  if (price_per_hour <= 0 || escrow_left <= 0) return 0;
  double factor = std::clamp(score / kReferenceScore, 0.1, 10.0);
  double hours = static_cast<double>(std::max<std::int64_t>(run_time.count(), 0)) / 3'600'000.0;
  double micro = price_per_hour * hours * factor * static_cast<double>(kMicroPerCredit);
  Micro charge = micro >= 9e15 ? Micro{9'000'000'000'000'000} : static_cast<Micro>(std::llround(micro));
  charge = std::max<Micro>(charge, 1);
  return std::min(charge, escrow_left);
}

AuditReport audit_ledger(std::span<const LedgerEntry> entries, const std::map<std::string, std::string>& task_finisher,
                         const std::map<std::string, PaidTerms>& terms) {
  AuditReport r;
  std::map<std::int64_t, Micro> txn_sum;
  std::map<std::string, Micro> balance;
  std::set<std::string> paid;
  for (const auto& e : entries) {
    ++r.entries;
    txn_sum[e.txn] += e.amount;
    balance[e.account] += e.amount;
    if (e.kind == "mint" && e.account == kMintAccount) r.minted -= e.amount;
    if (e.kind == "payment" && e.amount > 0) {
      if (!e.task) {
        r.problems.push_back("txn " + std::to_string(e.txn) + ": a payment to " + e.account + " names no task");
        continue;
      }
      auto it = task_finisher.find(*e.task);
      if (it == task_finisher.end())
        r.problems.push_back("txn " + std::to_string(e.txn) + ": payment for task " + *e.task + " which is not done");
      else if (peer_account(it->second) != e.account)
        r.problems.push_back("txn " + std::to_string(e.txn) + ": payment for task " + *e.task + " to " + e.account +
                             ", not to its finisher " + it->second);
      if (!paid.insert(*e.task).second) r.problems.push_back("task " + *e.task + " paid more than once");
      if (auto t = terms.find(*e.task); t != terms.end()) {
        const Micro most = task_charge(t->second.price_per_hour, t->second.score, t->second.run_time,
                                       std::numeric_limits<Micro>::max());
        if (e.amount > most)
          r.problems.push_back("txn " + std::to_string(e.txn) + ": task " + *e.task + " paid " + format_credits(e.amount) +
                               ", more than its lease's terms allow (" + format_credits(most) + ")");
      }
    }
  }
  // A device is paid for any moment once.
  std::map<std::string, std::vector<std::pair<std::pair<std::int64_t, std::int64_t>, std::string>>> spans;
  for (const auto& [task, t] : terms)
    if (t.paid_span && t.paid_span->second > t.paid_span->first) spans[t.device].push_back({*t.paid_span, task});
  for (auto& [device, list] : spans) {
    std::sort(list.begin(), list.end());
    for (std::size_t i = 1; i < list.size(); ++i)
      if (list[i].first.first < list[i - 1].first.second)
        r.problems.push_back("device " + device + " was paid twice for the same time: tasks " + list[i - 1].second +
                             " and " + list[i].second);
  }
  r.transactions = static_cast<std::int64_t>(txn_sum.size());
  for (const auto& [txn, sum] : txn_sum)
    if (sum != 0) r.problems.push_back("txn " + std::to_string(txn) + " sums to " + format_credits(sum) + ", not 0");
  for (const auto& [account, b] : balance)
    if (account != kMintAccount && b < 0) r.problems.push_back("account " + account + " is negative: " + format_credits(b));
  r.ok = r.problems.empty();
  return r;
}

}  // namespace runsnack::pool
