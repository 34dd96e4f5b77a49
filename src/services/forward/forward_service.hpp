#pragma once
// The "forward" service: TCP to a target the provider exposed
// (grant.terms["forward"], see forward_target.hpp). One stream per
// forwarded connection.
//
//   consumer -> header {"service":"forward","args":{"target":"NAME|PORT"}}
//   provider -> {"ok":true}                     (the stream header reply; the grant allows "forward")
//   provider -> {"ok":true,"target":{...}}      connected to the target; raw bytes follow both ways
//             | {"ok":false,"code":"refused","reason":"..."} then FIN
//   or, to learn what is exposed:
//   consumer -> header {"service":"forward","args":{"list":true}}
//   provider -> {"ok":true,"targets":[...],"max_connections":N|null,"bandwidth_bytes_per_s":N|null} then FIN
//
// Limits, enforced here from the grant: which targets; concurrent forwarded
// connections per session (terms.max_connections); bandwidth per session
// (grant.bandwidth_bytes_per_s, one token bucket for all of a session's
// connections, both directions). Every forwarded connection, refused or not,
// goes to the audit log: target, bytes each way, duration, why it ended.
//
// Threading: one executor. The SessionLimiter (services/common) is shared by
// the provider's handler (shared_ptr) and outlives the streams it serves.

#include "core/error.hpp"
#include "link/grant.hpp"
#include "net/mux_stream.hpp"
#include "services/forward/forward_target.hpp"
#include "services/common/session_limiter.hpp"
#include "session/service.hpp"
#include "session/session.hpp"

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace runsnack {

inline constexpr std::chrono::milliseconds kForwardConnectTimeout{5000};

// Provider half. A free function with by-value parameters (GCC 12 coroutine rule).
boost::asio::awaitable<void> serve_forward(std::shared_ptr<SessionLimiter> limiter, std::shared_ptr<MuxStream> stream,
                                           nlohmann::json args, ServiceContext context);

// Consumer halves.
struct ForwardListing {
  ForwardTerms terms;
  std::optional<std::int64_t> bandwidth_bytes_per_s;
};
boost::asio::awaitable<Result<ForwardListing>> list_forward_targets(Session& session);
// Opens a stream to `target` without waiting for the provider's answer, so that what the local
// client sends first follows the stream's header at once: a forwarded connection's first request
// travels in the round trip that opens it. The provider reads it only after connecting to the
// target; on a refusal it is dropped unread. session.answers(stream, kServiceForward) (the header's
// answer, then whether the target connected) comes before anything else read from the stream.
boost::asio::awaitable<Result<std::shared_ptr<MuxStream>>> open_forward(Session& session, const std::string& target);

}  // namespace runsnack
