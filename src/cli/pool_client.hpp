#pragma once
// A consumer's "pool-client" stream to a coordinator (pool/wire.hpp): opened over the
// submit link's session, one request and one answer at a time.

#include "core/error.hpp"
#include "session/session.hpp"

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include <memory>

namespace runsnack::cli {

// The stream, or a refusal that says when the link is the pool's join link.
boost::asio::awaitable<Result<std::shared_ptr<MuxStream>>> open_pool_client(Session& session);
// One request and its answer; errc::refused with the coordinator's words when it says no.
boost::asio::awaitable<Result<nlohmann::json>> call_pool(MuxStream& stream, const nlohmann::json& request);
// After a job is in: a broken session means reconnect and carry on (kReconnect); a refusal is final.
int lost_or_refused(const Error& e);

}  // namespace runsnack::cli
