#include "rendezvous/relay_budget.hpp"

#include "core/address_key.hpp"
#include "core/duration.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>

namespace runsnack::rdv {

namespace {

constexpr std::uint64_t kUnlimited = std::numeric_limits<std::uint64_t>::max();

std::string renews_in(std::chrono::steady_clock::time_point at, std::chrono::steady_clock::time_point now) {
  auto left = std::chrono::ceil<std::chrono::seconds>(std::max(at - now, std::chrono::steady_clock::duration::zero()));
  if (left >= std::chrono::minutes(2)) left = std::chrono::ceil<std::chrono::minutes>(left);
  return format_duration(left);
}

}  // namespace

std::string bytes_text(std::uint64_t bytes) {
  static const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  double v = static_cast<double>(bytes);
  int u = -1;
  while (v >= 1024 && u < 3) v /= 1024, ++u;
  char buf[32];
  if (v == static_cast<double>(static_cast<std::uint64_t>(v))) std::snprintf(buf, sizeof buf, "%.0f %s", v, units[u]);
  else std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

// ---- BudgetTable ----

std::uint64_t BudgetTable::remaining(const std::string& name, Time now) const {
  if (limit_ == 0) return kUnlimited;
  auto it = entries_.find(name);
  if (it == entries_.end() || now >= it->second.started + window_) return limit_;
  return limit_ - std::min(it->second.used, limit_);
}

void BudgetTable::charge(const std::string& name, std::uint64_t bytes, Time now) {
  if (limit_ == 0) return;
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    while (!order_.empty() && entries_.size() >= max_tracked_) {
      entries_.erase(order_.front());
      order_.pop_front();
    }
    if (max_tracked_ == 0) return;
    order_.push_back(name);
    it = entries_.emplace(name, Entry{0, now, std::prev(order_.end())}).first;
  } else {
    order_.splice(order_.end(), order_, it->second.order);  // now the most recently charged
  }
  Entry& e = it->second;
  if (now >= e.started + window_) e.used = 0, e.started = now;
  e.used = bytes > kUnlimited - e.used ? kUnlimited : e.used + bytes;
}

BudgetTable::Time BudgetTable::resets_at(const std::string& name, Time now) const {
  auto it = entries_.find(name);
  if (it == entries_.end() || now >= it->second.started + window_) return now;
  return it->second.started + window_;
}

void BudgetTable::expire(Time now) {
  while (!order_.empty()) {
    auto it = entries_.find(order_.front());
    if (now < it->second.started + window_) break;
    entries_.erase(it);
    order_.pop_front();
  }
}

// ---- RelayBudgets ----

RelayBudgets::RelayBudgets(RelayBudgetLimits limits, std::set<std::string> only_for)
    : limits_(limits),
      only_for_(std::move(only_for)),
      keys_(limits.per_key, limits.window, limits.max_tracked),
      addresses_(limits.per_address, limits.window, limits.max_tracked) {}

std::optional<std::string> RelayBudgets::spent_one(const std::string& peer, const std::string& ip, Time now) const {
  if (keys_.remaining(peer, now) == 0)
    return "the relay budget of provider " + peer + " is spent (" + bytes_text(keys_.limit()) + " per " +
           format_duration(limits_.window) + ", this rendezvous' --relay-per-key); it renews in " +
           renews_in(keys_.resets_at(peer, now), now);
  const std::string address = address_key(ip);
  if (addresses_.remaining(address, now) == 0)
    return "the relay budget of address " + address + " is spent (" + bytes_text(addresses_.limit()) + " per " +
           format_duration(limits_.window) + ", this rendezvous' --relay-per-address); it renews in " +
           renews_in(addresses_.resets_at(address, now), now);
  return std::nullopt;
}

std::optional<std::string> RelayBudgets::refuse(const std::string& peer, const std::string& ip,
                                                const std::optional<std::string>& other_ip, Time now) const {
  if (!listed(peer))
    return "this rendezvous relays only for the provider keys its operator lists, and provider " + peer +
           " is not one of them (a direct or punched path still works)";
  if (auto why = spent_one(peer, ip, now)) return why;
  if (other_ip) return spent_one(peer, *other_ip, now);
  return std::nullopt;
}

std::uint64_t RelayBudgets::remaining(const std::string& peer, const std::string& ip_a, const std::string& ip_b,
                                      Time now) const {
  const std::string a = address_key(ip_a), b = address_key(ip_b);
  return std::min({keys_.remaining(peer, now), addresses_.remaining(a, now), addresses_.remaining(b, now)});
}

void RelayBudgets::charge(const std::string& peer, const std::string& ip_a, const std::string& ip_b,
                          std::uint64_t bytes, Time now) {
  keys_.charge(peer, bytes, now);
  const std::string a = address_key(ip_a), b = address_key(ip_b);
  addresses_.charge(a, bytes, now);
  if (b != a) addresses_.charge(b, bytes, now);  // one address with both sides pays once
}

std::optional<std::string> RelayBudgets::spent(const std::string& peer, const std::string& ip_a,
                                               const std::string& ip_b, Time now) const {
  if (auto why = spent_one(peer, ip_a, now)) return why;
  return spent_one(peer, ip_b, now);
}

void RelayBudgets::expire(Time now) {
  keys_.expire(now);
  addresses_.expire(now);
}

}  // namespace runsnack::rdv
