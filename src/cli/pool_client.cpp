#include "cli/pool_client.hpp"

#include "cli/command.hpp"
#include "cli/session_runner.hpp"
#include "core/json_fields.hpp"
#include "pool/coordinator.hpp"
#include "pool/wire.hpp"

#include <iostream>

namespace runsnack::cli {

namespace asio = boost::asio;
using json = nlohmann::json;

asio::awaitable<Result<json>> call_pool(MuxStream& stream, const json& request) {
  auto w = co_await write_stream_message(stream, request);
  if (!w) co_return w.error();
  auto r = co_await read_stream_message(stream, pool::kMaxPoolMessageBytes);
  if (!r) co_return r.error();
  if (!r->is_object() || !bool_or(*r, "ok", false))
    co_return fail(errc::refused, r->is_object() ? string_or(*r, "error", "refused") : "bad answer");
  co_return *r;
}

asio::awaitable<Result<std::shared_ptr<MuxStream>>> open_pool_client(Session& session) {
  StreamHeader header;
  header.service = pool::kServiceClient;
  auto stream = co_await session.open(header);
  if (!stream && stream.error().what().find("does not allow") != std::string::npos)  // the join link, most likely
    co_return fail(errc::refused,
                   "this link does not let you submit or ask the pool: it is the pool's join link (for `pool join`). "
                   "Use the submit link, the \"submit:\" line `pool serve` printed (or one from `pool link`)");
  co_return stream;
}

int lost_or_refused(const Error& e) {
  if (e.is(errc::refused)) return report(e);
  std::cerr << "runsnack: the connection was lost; reconnecting..." << std::endl;
  return kReconnect;
}

}  // namespace runsnack::cli
