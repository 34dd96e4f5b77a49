#pragma once
// The dashboard's connection slots (HTTP and WebSocket together), shared
// fairly between client addresses, so that one address holding connections
// open (slow requests, unfinished TLS handshakes) cannot keep others out
// (docs/SECURITY.md, "A hostile peer, round 3"). Taken when a connection is
// accepted, before any byte is read.
//
// An address is an IPv4 address, or an IPv6 /64 (one subscriber's prefix), as
// for the provider's handshakes (provider/admission_slots.hpp). An address
// holds at most `per_address` slots: a connection past that is refused (the
// caller closes it at once; nothing is queued). When all `total` slots are
// taken, the address holding the most gives up its oldest evictable
// connection (still in TLS or HTTP, not yet a WebSocket), as long as it still
// holds at least as many as the newcomer's address afterwards; otherwise the
// newcomer is refused. So an address can hold at most `per_address` slots,
// and a new address gets in while some address holds two or more, one of
// them evictable.
//
// Pure bookkeeping: the caller closes what it is told to. Not thread-safe.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace runsnack::pool::dashboard {

class ConnectionSlots {
 public:
  ConnectionSlots(std::size_t per_address, std::size_t total) : per_address_(per_address), total_(total) {}

  struct Taken {
    std::optional<std::uint64_t> slot;   // none: refused, close the connection now
    std::optional<std::uint64_t> evict;  // close this connection now (its slot is already free)
  };
  // A slot for a new connection from `address_key`.
  Taken take(const std::string& address_key);
  // The connection became a WebSocket: it is never evicted (its own caps bound it).
  void keep(std::uint64_t slot);
  void release(std::uint64_t slot);  // the connection ended; unknown (evicted) slots are ignored
  bool holds(std::uint64_t slot) const { return slots_.count(slot) != 0; }

  std::size_t held() const { return slots_.size(); }
  std::size_t held(const std::string& address_key) const;

 private:
  struct Slot {
    std::string address;
    bool evictable = true;
  };
  std::optional<std::uint64_t> oldest_evictable(const std::set<std::uint64_t>& held) const;

  std::size_t per_address_, total_;
  std::uint64_t next_ = 1;                                    // slots are numbered in arrival order
  std::map<std::uint64_t, Slot> slots_;
  std::map<std::string, std::set<std::uint64_t>> by_address_;  // address -> its slots, oldest first
};

}  // namespace runsnack::pool::dashboard
