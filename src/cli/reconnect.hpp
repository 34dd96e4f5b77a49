#pragma once
// A new session after one was lost, as soon as the path allows it.
//
// One long dial into an outage is slow to notice the path's return: its lost
// SYNs are retried after 1, 2, 4... seconds, so it may try again seconds after
// the path is back. Here a new attempt starts every second while the earlier
// ones still wait (at most kMaxAttempts at once, each bounded by its own
// deadline), so some SYN goes out within a second of the return and the
// session is back about a handshake later. The first attempt to get a session
// wins; the others stop before their grant proof (ConnectOptions::still_wanted),
// so they do not count as uses of the link, and one that was already proving
// when the first won is closed at once.
//
// Attempts run on the caller's executor and use `consumer` until their own
// deadline (at most kAttemptTimeout): both must outlive them, which an
// io_context that runs until its work is done gives.

#include "consumer/consumer.hpp"
#include "core/error.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <memory>

namespace runsnack::cli {

inline constexpr std::chrono::milliseconds kAttemptEvery{1000};
inline constexpr std::chrono::milliseconds kAttemptTimeout{8000};
inline constexpr int kMaxAttempts = 8;

// Whether a failed connect may succeed later (the provider away, the path
// down); refusals (revoked, expired, wrong key) are final.
bool transient_connect_error(const Error& e);

// Keeps trying until a session is made, a refusal comes, `give_up` passes or
// `*stop` becomes true (checked every 50 ms; may be null). On failure returns
// the refusal, or the last attempt's error.
boost::asio::awaitable<Result<std::unique_ptr<Session>>> reconnect(Consumer& consumer, const Link& link,
                                                                   ConnectOptions options,
                                                                   std::chrono::steady_clock::time_point give_up,
                                                                   const bool* stop = nullptr);

}  // namespace runsnack::cli
