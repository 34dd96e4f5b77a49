#include "consumer/consumer.hpp"

#include "core/log_exceptions.hpp"
#include "crypto/tls.hpp"
#include "net/dial_race.hpp"
#include "net/path_plan.hpp"
#include "net/punch.hpp"
#include "net/tcp_tuning.hpp"
#include "net/transport.hpp"
#include "signaling/rdv_client.hpp"
#include "session/handshake.hpp"
#include "session/pending_auth.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>

namespace runsnack {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;

namespace {
// The shared_ptr parameter keeps the Mux alive while it runs (a capturing
// lambda would not: its captures die with the temporary lambda object).
asio::awaitable<void> run_mux(std::shared_ptr<Mux> mux) { co_await mux->run(); }

// A pipelined proof still unanswered after the connection's time: the session ends, as
// connect() would have failed.
asio::awaitable<void> end_unanswered(std::weak_ptr<Mux> mux, std::shared_ptr<PendingAuth> auth,
                                     std::chrono::milliseconds timeout) {
  asio::steady_timer timer(co_await asio::this_coro::executor, std::max(timeout, std::chrono::milliseconds(1)));
  while (!auth->settled() && timer.expiry() > asio::steady_timer::clock_type::now())
    co_await (auth->wait() || timer.async_wait(asio::as_tuple(asio::use_awaitable)));
  if (auth->settled()) co_return;
  auth->settle(fail(errc::timeout, "peer sent nothing in time"));
  if (auto m = mux.lock()) m->close();
}

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The plan (net/path_plan.hpp) and a signal for "the rendezvous answered",
// shared by connect() and the rendezvous racer.
struct Planned {
  Planned(asio::any_io_executor ex, PathPlan p) : plan(std::move(p)), answered(ex, Clock::time_point::max()) {}
  PathPlan plan;
  asio::steady_timer answered;  // cancelled when the introduction arrives or fails
};

// The caller has called race->hold() for us.
asio::awaitable<void> punch_racer(std::shared_ptr<DialRace> race, asio::ip::tcp::endpoint local,
                                  asio::ip::tcp::endpoint remote, Clock::time_point start) {
  auto s = co_await punch(local, remote, start, rdv::kPunchAttempts);
  if (s) race->handshake(std::move(*s), to_endpoint(remote), "punched");
  else race->note_failure("punch " + to_endpoint(remote).str() + ": " + s.error().what());
  race->release();
}

// One action of the plan, after the introduction.
asio::awaitable<void> carry_out(PathAction a, std::shared_ptr<DialRace> race, const Link& link,
                                const rdv::Introduction& intro, Clock::time_point deadline) {
  if (a.kind == PathAction::Kind::dial) {
    race->dial(a.endpoint, "direct");
  } else if (a.kind == PathAction::Kind::punch) {
    asio::ip::tcp::endpoint remote(asio::ip::make_address(a.endpoint.host), a.endpoint.port);
    auto ex = co_await asio::this_coro::executor;
    race->hold();
    asio::co_spawn(ex, punch_racer(race, intro.local, remote, a.at), asio::detached);
  } else {
    auto left = std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
    auto s = co_await rdv::open_relay(*link.rendezvous, intro.intro.token, "consumer", left);
    if (s) race->handshake(std::move(*s), *link.rendezvous, "relayed");
    else race->note_failure(s.error().what());
  }
}

// The introduction, then what the plan makes of it: more addresses, a
// simultaneous open and, later, the relay. The caller has called
// race->hold() for us.
asio::awaitable<void> rendezvous_racer(std::shared_ptr<DialRace> race, Link link, std::shared_ptr<Planned> planned,
                                       Clock::time_point deadline) {
  const auto left = std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
  const std::string peer = link.provider.str();
  auto intro = co_await rdv::request_introduction(*link.rendezvous, peer, link.grant_id, {}, left);
  planned->answered.cancel();
  if (!intro) {
    planned->plan.introduction_failed();
    race->note_failure(intro.error().what());
    race->release();
    co_return;
  }
  PathIntroduction told{intro->intro.candidates, intro->intro.mapped, std::nullopt,
                        intro->received + milliseconds(intro->intro.delay_ms), intro->intro.relay};
  boost::system::error_code ec;
  asio::ip::make_address(intro->intro.peer_observed.host, ec);
  if (!ec) told.punch_to = intro->intro.peer_observed;
  if (race->decided()) planned->plan.won();
  auto actions = planned->plan.introduced(told, Clock::now());
  for (const auto& a : actions) co_await carry_out(a, race, link, *intro, deadline);
  while (auto at = planned->plan.next_wakeup()) {
    co_await race->wait_decided(std::min(*at, deadline));
    if (race->decided()) planned->plan.won();
    auto due = planned->plan.tick(Clock::now());
    for (const auto& a : due) co_await carry_out(a, race, link, *intro, deadline);
    if (Clock::now() >= deadline) break;
  }
  // The signaling connection holds our NAT mapping while a punch may still land.
  co_await race->wait_decided(deadline);
  race->release();
}

// Returns when the rendezvous has answered, or after `at_most`.
asio::awaitable<void> wait_answered(std::shared_ptr<Planned> planned, milliseconds at_most) {
  if (planned->plan.rendezvous_answered()) co_return;
  asio::steady_timer t(co_await asio::this_coro::executor, at_most);
  co_await (planned->answered.async_wait(asio::as_tuple(asio::use_awaitable)) ||
            t.async_wait(asio::as_tuple(asio::use_awaitable)));
}
}  // namespace

Result<std::unique_ptr<Consumer>> Consumer::create(const Identity& identity) {
  auto ctx = make_tls_context(identity, TlsRole::client);
  if (!ctx) return ctx.error();
  return std::unique_ptr<Consumer>(new Consumer(asio::ssl::context(*ctx)));
}

asio::awaitable<Result<std::unique_ptr<Session>>> Consumer::connect(const Link& link, ConnectOptions options) {
  auto started = std::chrono::steady_clock::now();
  auto deadline = started + options.timeout;
  if (link.candidates.empty() && !link.rendezvous) co_return fail(errc::invalid_argument, "the link has no address to dial");
  auto ex = co_await asio::this_coro::executor;
  auto race = DialRace::create(ex, tls_, link.provider);
  auto planned = std::make_shared<Planned>(ex, PathPlan(link.candidates, deadline));
  for (const auto& a : planned->plan.start()) race->dial(a.endpoint, "direct");
  if (link.rendezvous) {
    race->hold();
    asio::co_spawn(ex, rendezvous_racer(race, link, planned, deadline), asio::detached);
  }
  auto dialed = co_await race->wait(deadline);
  if (!dialed) {
    if (dialed.error().is(errc::timeout) || dialed.error().is(errc::io_error))
      co_return Error(dialed.error().code,
                      dialed.error().what() + ": is `" + std::string(options.served_by) + "` still running, and reachable from here?");
    co_return dialed.error();
  }
  if (dialed->path == "direct" && link.rendezvous) {
    // A direct win may have been to the router's mapped port, which only the introduction names.
    co_await wait_answered(planned, milliseconds(500));
    dialed->path = planned->plan.name(dialed->endpoint, dialed->path);
  }
  if (options.still_wanted && !options.still_wanted())
    co_return fail(errc::closed, "another attempt made the session first");
  auto remaining = options.timeout - std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::steady_clock::now() - started);
  if (auto sent = co_await send_auth_hello(*dialed->stream, link); !sent) co_return sent.error();

  SessionInfo info;
  info.peer = link.provider;
  info.grant_id = link.grant_id;
  info.path = dialed->path;
  info.remote_address = dialed->endpoint.str();
  info.setup = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started);

  // A consumer opens streams and accepts one, the provider's goodbye, which hear_goodbye reads at once
  // (session/goodbye_exchange.hpp); a provider's SYNs past it are refused (so it cannot park data
  // in an accept backlog nobody drains).
  cap_retransmit_backoff(dialed->stream->next_layer());  // resume within ~1 s of an outage's end
  MuxConfig config;
  config.limits.accept_backlog = 1;
  // Given up for silence, the connection stays open, unused, while the session object lasts: the
  // provider keeps a command for a re-attach after silence, not after our FIN (MuxConfig::quiet_when_lost).
  config.quiet_when_lost = true;
  // The provider's answer to the proof comes first on the connection: the mux's reader takes it.
  auto auth = std::make_shared<PendingAuth>(ex);
  auto mux = Mux::create(answer_first(make_tls_transport(std::move(dialed->stream)), auth), yamux::Role::client, config);
  asio::co_spawn(ex, run_mux(mux), log_exceptions("session"));
  auto heard = std::make_shared<HeardGoodbye>();
  asio::co_spawn(ex, hear_goodbye(mux, heard), log_exceptions("goodbye"));
  auto session = std::make_unique<Session>(std::move(mux), std::move(info), auth, std::move(heard));
  if (options.pipelined_proof) {
    asio::co_spawn(ex, end_unanswered(std::weak_ptr<Mux>(session->shared_mux()), auth, remaining), asio::detached);
    co_return session;
  }
  asio::steady_timer timer(ex, std::max(remaining, std::chrono::milliseconds(1)));
  auto accepted = co_await (session->authenticated() || timer.async_wait(asio::as_tuple(asio::use_awaitable)));
  if (accepted.index() == 1) co_return fail(errc::timeout, "peer sent nothing in time");
  if (auto& a = std::get<0>(accepted); !a) co_return a.error();
  session->set_setup(std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started));
  co_return session;
}

}  // namespace runsnack
