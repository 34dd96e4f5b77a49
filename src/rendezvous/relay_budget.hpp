#pragma once
// What the relay may still move for whom over time (docs/NAT.md, "Relay budgets"):
// bytes per provider key and bytes per client address in a window (an hour
// by default), and the operator's list of provider keys it relays for.
// Pure: no sockets, no clock of its own (the caller passes `now`).
//
// A relayed pair is charged to three budgets: its provider's key (the PeerId
// that proved itself to the rendezvous), the provider side's address and the
// consumer side's address, each with every byte the pair moves in either
// direction. An address is an IPv4 address, or an IPv6 /64 (what one
// household or one server is given). A budget's window starts at its first
// charged byte and ends `window` later; then the next byte starts a new one.
// A spent budget refuses new relays and ends the running ones until its
// window ends.
//
// Bounded: each table keeps at most `max_tracked` entries; a full table
// forgets its least recently charged entry. An attacker who makes a table
// forget a spent entry must charge `max_tracked` other entries first: for
// keys, those bytes are charged to its addresses too; for addresses, it
// needs that many addresses, and so already has that many budgets.
//
// Not thread-safe; one owner.

#include <chrono>
#include <cstdint>
#include <list>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

namespace runsnack::rdv {

struct RelayBudgetLimits {
  std::uint64_t per_key = 2ull << 30;      // bytes per provider key per window; 0: no limit
  std::uint64_t per_address = 4ull << 30;  // bytes per client address (IPv4, IPv6 /64) per window; 0: no limit
  std::chrono::seconds window{3600};
  std::size_t max_tracked = 65536;  // entries per table (keys, addresses)
};

// One table: a byte budget per name, a window each, least recently charged forgotten first.
class BudgetTable {
 public:
  using Time = std::chrono::steady_clock::time_point;
  BudgetTable(std::uint64_t limit, std::chrono::seconds window, std::size_t max_tracked)
      : limit_(limit), window_(window), max_tracked_(max_tracked) {}

  // Bytes `name` may still move now (UINT64_MAX without a limit).
  std::uint64_t remaining(const std::string& name, Time now) const;
  void charge(const std::string& name, std::uint64_t bytes, Time now);
  // When `name`'s current window ends (for "again in ..."); now when it has none.
  Time resets_at(const std::string& name, Time now) const;
  std::uint64_t limit() const { return limit_; }
  std::size_t size() const { return entries_.size(); }
  // Forgets entries whose window has ended and that nothing charged since (from the least recent).
  void expire(Time now);

 private:
  struct Entry {
    std::uint64_t used = 0;
    Time started{};
    std::list<std::string>::iterator order;
  };
  std::uint64_t limit_;
  std::chrono::seconds window_;
  std::size_t max_tracked_;
  std::unordered_map<std::string, Entry> entries_;
  std::list<std::string> order_;  // least recently charged first
};

// The rendezvous' relay policy: who it relays for, and how much.
class RelayBudgets {
 public:
  using Time = BudgetTable::Time;
  // `only_for`: the provider keys (PeerId text) to relay for; empty: any proven key.
  explicit RelayBudgets(RelayBudgetLimits limits = {}, std::set<std::string> only_for = {});

  // Why a relay for provider `peer` with a side at `ip` is refused now, or
  // nothing. Pass the other side's address too once both have arrived.
  std::optional<std::string> refuse(const std::string& peer, const std::string& ip,
                                    const std::optional<std::string>& other_ip, Time now) const;
  // Bytes a pair of `peer` between `ip_a` and `ip_b` may still move: the least of its three budgets.
  std::uint64_t remaining(const std::string& peer, const std::string& ip_a, const std::string& ip_b, Time now) const;
  void charge(const std::string& peer, const std::string& ip_a, const std::string& ip_b, std::uint64_t bytes,
              Time now);
  // Why such a pair must stop (a spent budget), or nothing.
  std::optional<std::string> spent(const std::string& peer, const std::string& ip_a, const std::string& ip_b,
                                   Time now) const;
  void expire(Time now);

  bool listed(const std::string& peer) const { return only_for_.empty() || only_for_.contains(peer); }
  bool restricted() const { return !only_for_.empty(); }
  std::size_t tracked_keys() const { return keys_.size(); }
  std::size_t tracked_addresses() const { return addresses_.size(); }
  const RelayBudgetLimits& limits() const { return limits_; }

 private:
  std::optional<std::string> spent_one(const std::string& peer, const std::string& ip, Time now) const;
  RelayBudgetLimits limits_;
  std::set<std::string> only_for_;
  BudgetTable keys_, addresses_;
};

// 2147483648 -> "2 GiB", 1536 -> "1.5 KiB", 100 -> "100 bytes".
std::string bytes_text(std::uint64_t bytes);

}  // namespace runsnack::rdv
