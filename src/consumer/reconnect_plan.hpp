#pragma once
// When to start the next connection attempt after a session was lost, and
// when to stop: the decisions of reconnect() (consumer/reconnect.hpp) without
// sockets or clock, so a test steps them (reconnect_plan_test.cpp).
//
// Attempts overlap: a new one starts every `every` while earlier ones still
// wait (at most `max_in_flight` at once), so some SYN goes out within `every`
// of the path's return. The plan ends at the first session, at the first
// final refusal (transient_connect_error), when the owner stops, or at
// `give_up`.

#include "core/error.hpp"

#include <chrono>
#include <optional>

namespace runsnack {

struct ReconnectPolicy {
  std::chrono::milliseconds every{1000};            // a new attempt this often while none has won
  std::chrono::milliseconds attempt_timeout{8000};  // each attempt's own deadline (ConnectOptions::timeout at most)
  int max_in_flight = 8;                             // attempts waiting at once
  // A refusal for want of room (errc::exhausted: the link's --max-sessions, the provider's session
  // limits) is tried again until give_up instead of ending the plan. For a reconnect after a loss:
  // the lost session may still hold its place on the provider until the provider's keepalive lets
  // it go (~16 s; a consumer that gave up first leaves it open, MuxConfig::quiet_when_lost).
  bool retry_when_full = false;
};

// Whether a failed connect may succeed later (the provider away or
// restarting, the path down or garbled); a refusal (revoked, expired, used
// up, wrong key or secret, a service not allowed) or a link that cannot work
// is final.
bool transient_connect_error(const Error& e);

class ReconnectPlan {
 public:
  using Time = std::chrono::steady_clock::time_point;

  enum class Action { start_attempt, wait, finished };
  struct Step {
    Action action;
    Time until{};  // wait: until then at the latest (or until an attempt ends)
  };

  ReconnectPlan(ReconnectPolicy policy, Time give_up) : policy_(policy), give_up_(give_up) {}

  // What to do at `now`; `stop` says the owner wants no more attempts.
  // start_attempt counts the attempt as running: report its end with won() or failed().
  Step next(Time now, bool stop);
  void won();
  void failed(const Error& e);
  // Whether a failed attempt's `e` leaves the plan going (transient_connect_error, or a full
  // provider with retry_when_full).
  bool retried(const Error& e) const;

  bool finished() const { return finished_; }
  int in_flight() const { return in_flight_; }
  bool has_winner() const { return won_; }
  // Once finished without a session: the refusal, "stopped", the last
  // attempt's error or a timeout, in that order.
  Error failure() const;

 private:
  ReconnectPolicy policy_;
  Time give_up_;
  std::optional<Time> next_attempt_;  // none yet: the first starts at once
  int in_flight_ = 0;
  bool won_ = false;
  bool stopped_ = false;
  bool finished_ = false;
  std::optional<Error> refusal_;
  std::optional<Error> last_error_;
};

}  // namespace runsnack
