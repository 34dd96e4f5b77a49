#pragma once
// Connections still handshaking (TCP accepted; TLS and the grant proof not
// done yet), bounded per address and in all, so that one address holding
// idle connections cannot keep anyone else out (docs/SECURITY.md, "Protocol
// bounds and rendezvous").
//
// An address is an IPv4 address, or an IPv6 /64 (one subscriber's prefix).
// When a connection arrives and its address already has `per_address`
// pending, the oldest of them is closed to make room (an address's newest
// connection is the likeliest to be a real consumer); when `total` are
// pending, the oldest of the address with the most goes. So a new address
// always gets in, and an address can hold at most `per_address` slots.
//
// Pure bookkeeping: the caller closes what it is told to. Not thread-safe.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace runsnack {

class AdmissionSlots {
 public:
  AdmissionSlots(std::size_t per_address, std::size_t total) : per_address_(per_address), total_(total) {}

  struct Taken {
    std::uint64_t slot = 0;
    std::optional<std::uint64_t> evict;  // close this pending connection now
  };
  // A slot for a new connection from `address_key`. Never refuses (as long as per_address and total are above 0).
  Taken take(const std::string& address_key);
  void release(std::uint64_t slot);  // handshake over, either way; unknown slots are ignored

  std::size_t pending() const { return slots_.size(); }
  std::size_t pending(const std::string& address_key) const;

 private:
  std::size_t per_address_, total_;
  std::uint64_t next_ = 1;                       // slots are numbered in arrival order
  std::map<std::uint64_t, std::string> slots_;   // slot -> address key
  std::map<std::string, std::map<std::uint64_t, bool>> by_address_;  // address -> its slots (oldest first)
};

}  // namespace runsnack
