#include "services/forward/forward_service.hpp"

#include "core/json_fields.hpp"
#include "services/forward/host_rewriter.hpp"
#include "services/common/pump.hpp"
#include "session/stream_header.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

namespace runsnack {

namespace asio = boost::asio;
using asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;

namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

// Resolves (unless the host is an IP address, the usual case: no resolver
// thread to wake) and connects within kForwardConnectTimeout.
asio::awaitable<Result<tcp::socket>> connect_target(const ForwardTarget& target) {
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer deadline(ex, kForwardConnectTimeout);
  std::vector<tcp::endpoint> endpoints;
  boost::system::error_code not_ip;
  const auto ip = asio::ip::make_address(target.host, not_ip);
  if (!not_ip) {
    endpoints.emplace_back(ip, target.port);
  } else {
    tcp::resolver resolver(ex);
    const std::string port = std::to_string(target.port);
    auto resolved = co_await (resolver.async_resolve(target.host, port, kTuple) || deadline.async_wait(kTuple));
    if (resolved.index() == 1) co_return fail(errc::timeout, "resolving " + target.host + " timed out");
    auto [rec, results] = std::get<0>(resolved);
    if (rec) co_return fail(errc::io_error, "cannot resolve " + target.host + ": " + rec.message());
    for (const auto& r : results) endpoints.push_back(r.endpoint());
  }
  tcp::socket socket(ex);
  auto connected = co_await (asio::async_connect(socket, endpoints, kTuple) || deadline.async_wait(kTuple));
  if (connected.index() == 1)
    co_return fail(errc::timeout, "connecting to " + target.address() + " timed out after " +
                                      std::to_string(kForwardConnectTimeout.count() / 1000) + " s");
  auto [cec, endpoint] = std::get<0>(connected);
  if (cec)
    co_return fail(errc::refused, "the provider could not connect to " + target.address() + ": " + cec.message() +
                                      " (is the service running on the provider?)");
  boost::system::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  co_return std::move(socket);
}

asio::awaitable<void> refuse(MuxStream& stream, const std::string& reason) {
  const nlohmann::json reply = to_json(StreamReply{false, errc::refused, reason});
  if (co_await write_stream_message(stream, reply)) (void)co_await stream.close_write();
}

std::string exposed_names(const ForwardTerms& terms) {
  std::string out;
  for (const auto& t : terms.targets) out += (out.empty() ? "" : ", ") + t.name;
  return out.empty() ? "none" : out;
}

}  // namespace

asio::awaitable<void> serve_forward(std::shared_ptr<SessionLimiter> limiter, std::shared_ptr<MuxStream> stream,
                                    nlohmann::json args, ServiceContext context) {
  auto audit = [&](const std::string& decision, const std::string& reason, const nlohmann::json& detail) {
    if (context.audit) context.audit(kServiceForward, decision, reason, detail);
  };
  auto terms_json = context.grant.terms.contains(kServiceForward) ? context.grant.terms[kServiceForward] : nlohmann::json();
  auto terms = parse_forward_terms(terms_json);
  if (!terms) {
    spdlog::error("grant {}: bad forward terms: {}", context.grant.id, terms.error().what());
    co_await refuse(*stream, "this link's forward terms are damaged; ask the provider for a new link");
    co_return;
  }

  if (args.is_object() && bool_or(args, "list", false)) {
    nlohmann::json reply = {{"ok", true}, {"targets", to_json(*terms)["targets"]},
                            {"max_connections", to_json(*terms)["max_connections"]},
                            {"bandwidth_bytes_per_s", context.grant.bandwidth_bytes_per_s
                                                          ? nlohmann::json(*context.grant.bandwidth_bytes_per_s)
                                                          : nlohmann::json()}};
    if (co_await write_stream_message(*stream, reply)) (void)co_await stream->close_write();
    co_return;
  }

  std::string wanted;
  if (args.is_object() && args.contains("target") && args["target"].is_string())
    wanted = args["target"].get<std::string>().substr(0, kMaxTargetNameBytes);
  nlohmann::json detail = {{"session", context.session_id}, {"service", kServiceForward}, {"target", wanted}};
  const ForwardTarget* target = find_target(terms->targets, wanted);
  if (!target) {
    std::string reason = "target '" + wanted + "' is not exposed by this link (exposed: " + exposed_names(*terms) + ")";
    audit("refuse", reason, detail);
    co_await refuse(*stream, reason);
    co_return;
  }
  detail["target"] = target->name;
  detail["address"] = target->address();

  // Counts this connection for as long as it lives.
  auto slot = limiter->acquire(context.session_id, terms->max_connections, context.grant.bandwidth_bytes_per_s);
  if (!slot) {
    std::string reason = "too many forwarded connections at once (this link allows " +
                         std::to_string(*terms->max_connections) + ")";
    audit("refuse", reason, detail);
    co_await refuse(*stream, reason);
    co_return;
  }
  PumpOptions options;
  options.bucket = slot->bucket();

  const ForwardTarget chosen = *target;
  auto started = std::chrono::steady_clock::now();
  auto socket = co_await connect_target(chosen);
  if (!socket) {
    const std::string reason = socket.error().what();
    audit("refuse", reason, detail);
    co_await refuse(*stream, reason);
    co_return;
  }
  const nlohmann::json ok = {{"ok", true}, {"target", to_json(chosen)}};
  if (!co_await write_stream_message(*stream, ok)) co_return;

  std::optional<HostRewriter> rewriter;
  if (chosen.host_header) {
    rewriter.emplace(chosen.address());
    options.rewrite = [&host = *rewriter](std::span<const std::uint8_t> in, std::string& out) { host.feed(in, out); };
  }
  PumpResult result = co_await pump(*socket, *stream, options);
  detail["bytes_to_target"] = result.stream_to_socket;
  detail["bytes_from_target"] = result.socket_to_stream;
  detail["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  audit("accept", result.error ? "ended: " + *result.error : "closed", detail);
}

asio::awaitable<Result<ForwardListing>> list_forward_targets(Session& session) {
  const StreamHeader header{kServiceForward, {{"list", true}}};
  auto stream = co_await session.open(header);
  if (!stream) co_return stream.error();
  auto msg = co_await read_stream_message(**stream);
  if (!msg) co_return msg.error();
  if (!msg->is_object() || !bool_or(*msg, "ok", false)) {
    auto reply = parse_stream_reply(*msg);
    co_return fail(errc::refused, reply ? reply->reason : std::string("the provider's answer did not parse"));
  }
  auto terms = parse_forward_terms(*msg);
  if (!terms) co_return terms.error();
  ForwardListing listing{std::move(*terms), std::nullopt};
  if (auto b = msg->find("bandwidth_bytes_per_s"); b != msg->end() && b->is_number_integer())
    listing.bandwidth_bytes_per_s = b->get<std::int64_t>();
  co_return listing;
}

asio::awaitable<Result<std::shared_ptr<MuxStream>>> open_forward(Session& session, const std::string& target) {
  const StreamHeader header{kServiceForward, {{"target", target}}};
  co_return co_await session.open_pipelined(header);
}

}  // namespace runsnack
