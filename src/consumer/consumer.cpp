#include "consumer/consumer.hpp"

#include "crypto/tls.hpp"
#include "net/dialer.hpp"
#include "net/transport.hpp"
#include "session/handshake.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>

#include <spdlog/spdlog.h>

namespace runsnack {

namespace asio = boost::asio;

namespace {
// The shared_ptr parameter keeps the Mux alive while it runs (a capturing
// lambda would not: its captures die with the temporary lambda object).
asio::awaitable<void> run_mux(std::shared_ptr<Mux> mux) { co_await mux->run(); }
}  // namespace

Result<std::unique_ptr<Consumer>> Consumer::create(const Identity& identity) {
  auto ctx = make_tls_context(identity, TlsRole::client);
  if (!ctx) return ctx.error();
  return std::unique_ptr<Consumer>(new Consumer(asio::ssl::context(*ctx)));
}

asio::awaitable<Result<std::unique_ptr<Session>>> Consumer::connect(const Link& link, ConnectOptions options) {
  auto started = std::chrono::steady_clock::now();
  if (link.candidates.empty())
    co_return fail(errc::unsupported,
                   "this link has only a rendezvous address; this version of runsnack dials providers directly");
  auto dialed = co_await dial_direct(tls_, link.candidates, link.provider, options.timeout);
  if (!dialed) co_return dialed.error();
  auto remaining = options.timeout - std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::steady_clock::now() - started);
  auto session_id = co_await prove_grant(*dialed->stream, link, std::max(remaining, std::chrono::milliseconds(1)));
  if (!session_id) co_return session_id.error();

  SessionInfo info;
  info.session_id = *session_id;
  info.peer = link.provider;
  info.grant_id = link.grant_id;
  info.path = kPathDirect;
  info.remote_address = dialed->endpoint.str();
  info.setup = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started);

  auto mux = Mux::create(make_tls_transport(std::move(dialed->stream)), yamux::Role::client);
  asio::co_spawn(co_await asio::this_coro::executor, run_mux(mux), [](std::exception_ptr e) {
                   if (!e) return;
                   try {
                     std::rethrow_exception(e);
                   } catch (const std::exception& ex) {
                     spdlog::error("session: {}", ex.what());
                   }
                 });
  co_return std::make_unique<Session>(std::move(mux), std::move(info));
}

}  // namespace runsnack
