#include "consumer/consumer.hpp"

#include "core/log_exceptions.hpp"
#include "crypto/tls.hpp"
#include "net/dial_race.hpp"
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

// When nothing direct or punched has won this long after the synchronised
// start, the relay joins the race.
constexpr milliseconds kRelayAfter{1500};

// What the rendezvous told us, for naming the path afterwards.
struct RendezvousNotes {
  bool answered = false;  // introduction received, or failed
  std::optional<Endpoint> mapped;
};

asio::awaitable<void> sleep_until_decided(std::shared_ptr<DialRace> race, Clock::time_point until) {
  asio::steady_timer t(co_await asio::this_coro::executor);
  while (!race->decided() && Clock::now() < until) {
    t.expires_after(std::min<Clock::duration>(milliseconds(25), until - Clock::now()));
    co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

asio::awaitable<void> wait_for_notes(std::shared_ptr<RendezvousNotes> notes, milliseconds at_most) {
  asio::steady_timer t(co_await asio::this_coro::executor);
  auto until = Clock::now() + at_most;
  while (!notes->answered && Clock::now() < until) {
    t.expires_after(milliseconds(25));
    co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

// The caller has called race->hold() for us.
asio::awaitable<void> punch_racer(std::shared_ptr<DialRace> race, asio::ip::tcp::endpoint local,
                                  asio::ip::tcp::endpoint remote, Clock::time_point start) {
  auto s = co_await punch(local, remote, start, rdv::kPunchAttempts);
  if (s) race->handshake(std::move(*s), to_endpoint(remote), "punched");
  else race->note_failure("punch " + to_endpoint(remote).str() + ": " + s.error().what());
  race->release();
}

// Introduction, then a simultaneous open and, later, the relay. The caller
// has called race->hold() for us.
asio::awaitable<void> rendezvous_racer(std::shared_ptr<DialRace> race, Link link,
                                       std::shared_ptr<RendezvousNotes> notes, Clock::time_point deadline) {
  auto left = [&] { return std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(deadline - Clock::now())); };
  const std::string peer = link.provider.str();
  auto intro = co_await rdv::request_introduction(*link.rendezvous, peer, link.grant_id, {}, left());
  notes->answered = true;
  if (!intro) {
    race->note_failure(intro.error().what());
    race->release();
    co_return;
  }
  notes->mapped = intro->intro.mapped;
  auto ex = co_await asio::this_coro::executor;
  // The provider's current candidates, which a short link may have left out.
  for (const auto& c : intro->intro.candidates)
    if (std::find(link.candidates.begin(), link.candidates.end(), c) == link.candidates.end()) race->dial(c, "direct");
  if (notes->mapped && std::find(link.candidates.begin(), link.candidates.end(), *notes->mapped) == link.candidates.end())
    race->dial(*notes->mapped, "direct");
  auto start = intro->received + milliseconds(intro->intro.delay_ms);
  boost::system::error_code ec;
  auto remote_addr = asio::ip::make_address(intro->intro.peer_observed.host, ec);
  if (!ec) {
    race->hold();
    asio::co_spawn(ex, punch_racer(race, intro->local, {remote_addr, intro->intro.peer_observed.port}, start),
                   asio::detached);
  }
  if (intro->intro.relay) {
    co_await sleep_until_decided(race, std::min(start + kRelayAfter, deadline));
    if (!race->decided() && Clock::now() < deadline) {
      auto s = co_await rdv::open_relay(*link.rendezvous, intro->intro.token, "consumer", left());
      if (s) race->handshake(std::move(*s), *link.rendezvous, "relayed");
      else race->note_failure(s.error().what());
    }
  }
  // The signaling connection holds our NAT mapping while a punch may still land.
  co_await sleep_until_decided(race, deadline);
  race->release();
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
  for (const auto& c : link.candidates) race->dial(c, "direct");
  auto notes = std::make_shared<RendezvousNotes>();
  if (link.rendezvous) {
    race->hold();
    asio::co_spawn(ex, rendezvous_racer(race, link, notes, deadline), asio::detached);
  }
  auto dialed = co_await race->wait(deadline);
  if (!dialed) co_return dialed.error();
  if (dialed->path == "direct" && link.rendezvous) {
    // A direct win may have been to the router's mapped port: ask the notes.
    co_await wait_for_notes(notes, milliseconds(500));
    if (notes->mapped && *notes->mapped == dialed->endpoint) dialed->path = "mapped";
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

  // A consumer opens streams and accepts none: a provider's SYNs are refused
  // (so it cannot park data in an accept backlog nobody drains).
  cap_retransmit_backoff(dialed->stream->next_layer());  // resume within ~1 s of an outage's end
  MuxConfig config;
  config.limits.accept_backlog = 0;
  // The provider's answer to the proof comes first on the connection: the mux's reader takes it.
  auto auth = std::make_shared<PendingAuth>(ex);
  auto mux = Mux::create(answer_first(make_tls_transport(std::move(dialed->stream)), auth), yamux::Role::client, config);
  asio::co_spawn(ex, run_mux(mux), log_exceptions("session"));
  auto session = std::make_unique<Session>(std::move(mux), std::move(info), auth);
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
