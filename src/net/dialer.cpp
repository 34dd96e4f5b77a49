#include "net/dialer.hpp"

#include "crypto/tls.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <memory>

namespace runsnack {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

// Shared by the racers: the winner, everyone's failures, and a timer the
// caller waits on (cancelled = "something happened").
struct Race {
  explicit Race(asio::any_io_executor ex) : wake(ex) {}
  asio::steady_timer wake;
  std::vector<asio::cancellation_signal> cancel;
  std::optional<DialResult> winner;
  std::vector<std::string> failures;
  bool saw_wrong_peer = false;
  std::size_t finished = 0;
};

asio::awaitable<void> attempt(std::shared_ptr<Race> race, asio::ssl::context& tls, Endpoint ep,
                              PeerId expected, std::chrono::steady_clock::time_point started) {
  auto ex = co_await asio::this_coro::executor;
  auto record_failure = [&](std::string why, bool wrong_peer = false) {
    race->failures.push_back(ep.str() + ": " + why);
    race->saw_wrong_peer |= wrong_peer;
  };
  tcp::resolver resolver(ex);
  auto [rerr, results] = co_await resolver.async_resolve(ep.host, std::to_string(ep.port), asio::as_tuple(asio::use_awaitable));
  if (rerr) {
    record_failure(rerr.message());
  } else {
    auto stream = std::make_unique<TlsStream>(ex, tls);
    auto [cerr, _] = co_await asio::async_connect(stream->next_layer(), results, asio::as_tuple(asio::use_awaitable));
    if (cerr) {
      record_failure(cerr.message());
    } else {
      stream->next_layer().set_option(tcp::no_delay(true));
      expect_peer(stream->native_handle(), expected);
      auto [herr] = co_await stream->async_handshake(asio::ssl::stream_base::client, asio::as_tuple(asio::use_awaitable));
      if (herr) {
        auto seen = rejected_peer(stream->native_handle());
        record_failure(seen ? "provider key is " + seen->str() + ", the link says " + expected.str()
                            : "TLS: " + herr.message(),
                       seen.has_value());
      } else if (!race->winner) {
        race->winner = DialResult{std::move(stream), ep,
                                  std::chrono::duration_cast<std::chrono::microseconds>(
                                      std::chrono::steady_clock::now() - started)};
      }
    }
  }
  ++race->finished;
  race->wake.cancel();
}

}  // namespace

asio::awaitable<Result<DialResult>> dial_direct(asio::ssl::context& tls, const std::vector<Endpoint>& candidates,
                                                const PeerId& expected, std::chrono::milliseconds timeout) {
  if (candidates.empty()) co_return fail(errc::invalid_argument, "the link has no address to dial");
  auto ex = co_await asio::this_coro::executor;
  auto race = std::make_shared<Race>(ex);
  race->cancel = std::vector<asio::cancellation_signal>(candidates.size());
  auto started = std::chrono::steady_clock::now();
  auto deadline = started + timeout;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    asio::co_spawn(ex, attempt(race, tls, candidates[i], expected, started),
                   asio::bind_cancellation_slot(race->cancel[i].slot(), asio::detached));
  }
  while (!race->winner && race->finished < candidates.size() && std::chrono::steady_clock::now() < deadline) {
    race->wake.expires_at(deadline);
    co_await race->wake.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  // Losers still running are cancelled; they finish on their own and touch only `race`.
  for (auto& c : race->cancel) c.emit(asio::cancellation_type::terminal);
  if (race->winner) {
    DialResult r = std::move(*race->winner);
    race->winner.reset();
    co_return r;
  }
  std::string why;
  for (const auto& f : race->failures) why += (why.empty() ? "" : "; ") + f;
  if (race->saw_wrong_peer)
    co_return fail(errc::peer_mismatch,
                   "the provider's key does not match the link (" + why +
                       "): the link may be tampered with, or the provider's identity changed");
  if (race->finished < candidates.size())
    co_return fail(errc::timeout, "no answer from the provider within " + std::to_string(timeout.count()) +
                                      " ms" + (why.empty() ? "" : " (" + why + ")") +
                                      ": is `runsnack share` still running, and reachable from here?");
  co_return fail(errc::io_error, "cannot reach the provider (" + why +
                                     "): is `runsnack share` still running, and reachable from here?");
}

}  // namespace runsnack
