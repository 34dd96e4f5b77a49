#pragma once
// A new session after one was lost, as soon as the path allows it: the one
// reconnect helper of `run`/`info`/... (cli/session_runner.cpp), `forward`
// (cli/cmd_forward.cpp) and the pool worker (pool/worker.cpp).
//
// One long dial into an outage is slow to notice the path's return: its lost
// SYNs are retried after 1, 2, 4... seconds, so it may try again seconds after
// the path is back. Here a new attempt starts every second while the earlier
// ones still wait (ReconnectPlan: at most max_in_flight at once, each bounded
// by its own deadline), so some SYN goes out within a second of the return and
// the session is back about a handshake later. The first attempt to get a
// session wins; the others stop before their grant proof
// (ConnectOptions::still_wanted), so they do not count as uses of the link,
// and one that was already proving when the first won is closed at once.
//
// Attempts run on the caller's executor and use `consumer` until their own
// deadline (at most policy.attempt_timeout): both must outlive them, which an
// io_context that runs until its work is done gives.

#include "consumer/consumer.hpp"
#include "consumer/reconnect_plan.hpp"
#include "core/error.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <functional>
#include <memory>

namespace runsnack {

struct ReconnectOptions {
  ConnectOptions connect;  // each attempt's; its timeout is capped at policy.attempt_timeout
  ReconnectPolicy policy;
  std::chrono::steady_clock::time_point give_up = std::chrono::steady_clock::time_point::max();
  const bool* stop = nullptr;  // when it becomes true, no more attempts (checked every 50 ms); may be null
  // Called for each attempt that failed but may succeed later (the caller's
  // log line; every failure is also logged at debug level). May be empty.
  std::function<void(const Error&)> on_retry;
};

// Keeps trying until a session is made, a refusal comes, `give_up` passes or
// `*stop` becomes true. On failure returns ReconnectPlan::failure().
boost::asio::awaitable<Result<std::unique_ptr<Session>>> reconnect(Consumer& consumer, const Link& link,
                                                                   ReconnectOptions options);

}  // namespace runsnack
