#pragma once
// The provider's goodbye (session/goodbye.hpp, which draws the exchange) over a running Mux: the
// provider's half says it and closes the session; the consumer's half hears it. Both run on the
// Mux's executor; not thread-safe.

#include "net/yamux_session.hpp"
#include "session/goodbye.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>

namespace runsnack {

// How long the provider waits for the consumer's acknowledgment before it closes anyway: a
// consumer whose path is gone never answers.
inline constexpr std::chrono::milliseconds kGoodbyeWait{2000};
// The largest goodbye header a consumer reads.
inline constexpr std::uint32_t kMaxGoodbyeBytes = 4096;

// Provider: opens the goodbye stream, sends `goodbye`, waits for the answer (at most `wait`), then
// closes the session (Mux::close). Never fails: whatever goes wrong, the session is closed.
boost::asio::awaitable<void> say_goodbye(std::shared_ptr<Mux> mux, Goodbye goodbye, std::chrono::milliseconds wait);

// Consumer: what the provider said, once it said it. Filled by hear_goodbye, read through
// Session::goodbye(): set before the provider closes the session, so whoever sees the session
// end can look here.
struct HeardGoodbye {
  std::optional<Goodbye> goodbye;
};

// Consumer: accepts the streams the provider opens until the session ends. The first goodbye fills
// `heard` and is answered; any other stream (or a second goodbye) is reset. The Mux must accept
// streams (yamux::MuxLimits::accept_backlog 1 is enough). Ends with the session.
boost::asio::awaitable<void> hear_goodbye(std::shared_ptr<Mux> mux, std::shared_ptr<HeardGoodbye> heard);

}  // namespace runsnack
