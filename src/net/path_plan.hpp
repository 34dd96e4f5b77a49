#pragma once
// How a consumer reaches a provider (docs/ARCHITECTURE.md section 5.3), as a
// pure state machine: events in (the start, the rendezvous' introduction or
// its failure, a path won, the time), actions out (dial an address, punch at
// the synchronised start, open the relay). No I/O and no clock of its own:
// consumer.cpp carries the actions out, DialRace races what they produce,
// and path_plan_test steps the plan with a made-up clock.
//
// The rules: the link's candidates are dialed at once; the introduction adds
// the provider's current candidates and its port-mapped address (each address
// once), and a simultaneous open at the moment the rendezvous set; when the
// rendezvous relays and nothing has won kRelayAfter after that moment, the
// relay joins the race; nothing starts once a path has won or the deadline
// has passed.

#include "link/endpoint.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace runsnack {

struct PathIntroduction {
  std::vector<Endpoint> candidates;                     // the provider's current direct candidates
  std::optional<Endpoint> mapped;                       // its port-mapped address, if any
  std::optional<Endpoint> punch_to;                     // the provider as the rendezvous saw it (an IP)
  std::chrono::steady_clock::time_point punch_at{};     // the synchronised start
  bool relay = false;                                   // the rendezvous relays this pair
};

struct PathAction {
  enum class Kind { dial, punch, open_relay };
  Kind kind = Kind::dial;
  Endpoint endpoint;                                    // dial, punch: where to
  std::chrono::steady_clock::time_point at{};           // punch: the synchronised start
  friend bool operator==(const PathAction&, const PathAction&) = default;
};

class PathPlan {
 public:
  using Clock = std::chrono::steady_clock;
  // Time a direct or punched path has, after the synchronised start, before the relay joins.
  static constexpr std::chrono::milliseconds kRelayAfter{1500};

  PathPlan(std::vector<Endpoint> link_candidates, Clock::time_point deadline);

  std::vector<PathAction> start();
  std::vector<PathAction> introduced(const PathIntroduction& intro, Clock::time_point now);
  void introduction_failed() { answered_ = true; }
  void won() { won_ = true; }
  // The actions whose time has come (the relay).
  std::vector<PathAction> tick(Clock::time_point now);
  // When tick() next has something to do; nullopt when nothing is pending.
  std::optional<Clock::time_point> next_wakeup() const;

  bool rendezvous_answered() const { return answered_; }
  // A winning attempt's path as the user sees it: a direct win on the
  // provider's port-mapped address is "mapped".
  std::string name(const Endpoint& winner, const std::string& path) const;

 private:
  std::vector<PathAction> dial_new(const Endpoint& e);
  std::vector<Endpoint> dialed_;
  Clock::time_point deadline_;
  std::optional<Endpoint> mapped_;
  std::optional<Clock::time_point> relay_at_;
  bool answered_ = false;
  bool won_ = false;
};

}  // namespace runsnack
