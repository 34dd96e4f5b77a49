#pragma once
// What a rendezvous knows, without sockets or a clock of its own (docs/ARCHITECTURE.md
// section 13, rule 3): providers still proving their PeerId, authenticated registrations,
// relay slots and per-IP counts. The server (rdv_server.cpp) moves the bytes
// and asks the Registry what to do; rdv_server_fuzz.cpp drives it with
// arbitrary messages from many connections.
//
// Rules it enforces (docs/NAT.md, "Who may register, who may relay"):
// - A registration proves its PeerId: the rendezvous sends a fresh 32-byte
//   nonce and registers the connection only when the provider answers with
//   the Ed25519 public key whose hash is the PeerId and a signature over
//   registration_proof_message(nonce, peer). So only the key's owner can
//   claim a PeerId, and only it receives consumers' addresses and tokens.
// - One key may hold several registrations (two `runsnack share` processes,
//   or a provider whose network changed); introductions go to the newest
//   that serves the grant. Nobody else can displace them.
// - A relay slot exists only for an introduction made to an authenticated
//   provider, with one token per side: the provider's goes only to that
//   provider, the consumer's only to that consumer. A token opens its own
//   side only, once; the pair is spliced when both have arrived.
// - Bounds: registrations in all and per key, unproven registrations,
//   pending introductions and relay sides per IP (RegistryLimits).
//
// Not thread-safe; one owner.

#include "core/error.hpp"
#include "link/endpoint.hpp"
#include "signaling/rdv_codec.hpp"

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace runsnack::rdv {

using ConnId = std::uint64_t;
using SteadyTime = std::chrono::steady_clock::time_point;

struct RegistryLimits {
  std::size_t max_providers = 100000;           // authenticated registrations, all keys
  std::size_t max_registrations_per_peer = 4;   // the same key from several processes or networks
  std::size_t max_unproven_per_ip = 16;         // registrations waiting for their proof
  std::size_t max_pending_intros_per_ip = 16;
  std::size_t max_relay_sides_per_ip = 16;      // relay connections, waiting or spliced
  std::chrono::milliseconds relay_match_timeout{15000};
};

struct Registration {
  ConnId conn = 0;
  std::string peer;
  std::string ip;
  Endpoint observed;
  std::vector<std::string> grants;
  std::vector<Endpoint> candidates;
  std::optional<Endpoint> mapped;
  std::chrono::milliseconds rtt{0};
  std::uint64_t order = 0;  // later registrations serve introductions first
};

enum class RelaySide { provider, consumer };

struct RelayTokens {
  std::uint64_t slot = 0;
  std::string provider;  // goes to the provider's signaling connection only
  std::string consumer;  // goes to the consumer only
};

struct RelayClaim {
  std::uint64_t slot = 0;
  RelaySide side = RelaySide::consumer;
  bool complete = false;  // the other side is already waiting: splice now (the slot is gone)
  std::string peer;       // the provider the slot was opened for (its proven PeerId)
};

class Registry {
 public:
  explicit Registry(RegistryLimits limits) : limits_(limits) {}

  // A provider connection's first `register`. The caller sends the returned
  // Challenge (with the caller's fresh random nonce). errc::exhausted when
  // the rendezvous or this IP has no room.
  Result<Challenge> challenge(ConnId conn, Register reg, const std::string& ip, Endpoint observed,
                              const std::array<std::uint8_t, 32>& nonce);
  // Its `prove`: errc::auth_failed unless the key hashes to the PeerId and
  // signs the challenge. On success the connection is registered (the
  // oldest of the same key goes when it has max_registrations_per_peer:
  // returned, for the caller to close).
  Result<std::optional<ConnId>> prove(ConnId conn, const Prove& proof);
  // A later `register` on a registered connection (links made or revoked):
  // the same PeerId only.
  Result<void> update(ConnId conn, const Register& reg);
  void set_rtt(ConnId conn, std::chrono::milliseconds rtt);
  // The connection ended, at whatever stage.
  void remove(ConnId conn);

  const Registration* registration(ConnId conn) const;
  // The newest registration of `peer` serving `grant`, or null.
  const Registration* serving(const std::string& peer, const std::string& grant) const;
  std::size_t providers() const { return registered_.size(); }
  std::size_t unproven() const { return unproven_.size(); }

  // Pending introductions per consumer IP.
  bool begin_intro(const std::string& ip);  // false at the limit
  void end_intro(const std::string& ip);

  // A relay slot for an introduction to the registered `provider`; the two
  // tokens are the caller's fresh random ones (kTokenLength base32).
  Result<RelayTokens> open_relay(ConnId provider, std::string provider_token, std::string consumer_token,
                                 SteadyTime now);
  // A relay connection presents `token` for `side` from `ip`. errc::not_found
  // for an unknown, expired or spent token or one of the other side;
  // errc::exhausted at the per-IP limit. Counts the side against its IP until
  // relay_side_ended(ip).
  Result<RelayClaim> claim_relay(const std::string& token, const std::string& side, const std::string& ip,
                                 SteadyTime now);
  void relay_side_ended(const std::string& ip);
  // Slots past their match deadline, removed; their parked sides are the caller's to close.
  std::vector<std::uint64_t> expire(SteadyTime now);
  std::size_t relay_slots() const { return slots_.size(); }

 private:
  struct Unproven {
    Register reg;
    std::string ip;
    Endpoint observed;
    std::array<std::uint8_t, 32> nonce{};
  };
  struct Slot {
    SteadyTime expires;
    std::string peer;
    std::string tokens[2];  // by RelaySide
    bool arrived[2] = {false, false};
  };
  void count_down(std::map<std::string, std::size_t>& counts, const std::string& ip);

  RegistryLimits limits_;
  std::map<ConnId, Unproven> unproven_;
  std::map<ConnId, Registration> registered_;
  std::multimap<std::string, ConnId> by_peer_;
  std::map<std::string, std::size_t> unproven_per_ip_, intros_per_ip_, relay_sides_per_ip_;
  std::map<std::uint64_t, Slot> slots_;
  std::map<std::string, std::pair<std::uint64_t, RelaySide>> tokens_;
  std::uint64_t next_order_ = 1;
  std::uint64_t next_slot_ = 1;
};

}  // namespace runsnack::rdv
