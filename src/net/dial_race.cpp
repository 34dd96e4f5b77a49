#include "net/dial_race.hpp"

#include "crypto/tls.hpp"
#include "net/punch.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace runsnack {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

asio::awaitable<void> tls_attempt(std::shared_ptr<DialRace> race, std::unique_ptr<TlsStream> stream, Endpoint ep,
                                  std::string path) {
  stream->next_layer().set_option(tcp::no_delay(true));
  expect_peer(stream->native_handle(), race->expected());
  auto [herr] = co_await stream->async_handshake(asio::ssl::stream_base::client, asio::as_tuple(asio::use_awaitable));
  if (herr) {
    auto seen = rejected_peer(stream->native_handle());
    // A system error is the connect's own, which TCP Fast Open defers to the handshake's first write.
    const bool from_socket = herr.category() == boost::system::system_category();
    race->record(ep.str() + " (" + path + "): " +
                     (seen ? "provider key is " + seen->str() + ", the link says " + race->expected().str()
                           : (from_socket ? "" : "TLS: ") + herr.message()),
                 seen.has_value());
  } else {
    race->offer(DialResult{std::move(stream), ep,
                           std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                                                 race->started()),
                           path});
  }
  race->finish_attempt();
}

asio::awaitable<void> dial_attempt(std::shared_ptr<DialRace> race, Endpoint ep, std::string path) {
  auto s = co_await connect_endpoint(ep, std::chrono::milliseconds(60000), {.fast_open = true});
  if (!s) {
    race->record(ep.str() + ": " + s.error().what(), false);
    race->finish_attempt();
    co_return;
  }
  auto stream = std::make_unique<TlsStream>(std::move(*s), race->tls());
  co_await tls_attempt(race, std::move(stream), std::move(ep), std::move(path));
}

}  // namespace

DialRace::DialRace(asio::any_io_executor ex, asio::ssl::context& tls, PeerId expected)
    : ex_(ex), tls_(tls), expected_(std::move(expected)), wake_(ex) {}

std::shared_ptr<DialRace> DialRace::create(asio::any_io_executor ex, asio::ssl::context& tls, PeerId expected) {
  return std::shared_ptr<DialRace>(new DialRace(ex, tls, std::move(expected)));
}

void DialRace::dial(Endpoint endpoint, std::string path) {
  if (decided()) return;
  ++running_;
  auto& sig = cancel_.emplace_back();
  asio::co_spawn(ex_, dial_attempt(shared_from_this(), std::move(endpoint), std::move(path)),
                 asio::bind_cancellation_slot(sig.slot(), asio::detached));
}

void DialRace::handshake(tcp::socket socket, Endpoint remote, std::string path) {
  if (decided()) return;  // the socket closes here
  ++running_;
  auto& sig = cancel_.emplace_back();
  auto stream = std::make_unique<TlsStream>(std::move(socket), tls_);
  asio::co_spawn(ex_, tls_attempt(shared_from_this(), std::move(stream), std::move(remote), std::move(path)),
                 asio::bind_cancellation_slot(sig.slot(), asio::detached));
}

void DialRace::release() {
  if (held_ > 0) --held_;
  wake_.cancel();
}

void DialRace::note_failure(std::string why) { record(std::move(why), false); }

void DialRace::record(std::string why, bool wrong_peer) {
  if (failures_.size() < 16) failures_.push_back(std::move(why));
  saw_wrong_peer_ |= wrong_peer;
}

void DialRace::offer(DialResult r) {
  if (decided()) return;  // a loser that finished late: its stream closes
  winner_ = std::move(r);
  wake_.cancel();
  wake_decided_waiters();
}

void DialRace::wake_decided_waiters() {
  for (auto* t : decided_waiters_) t->cancel();
}

asio::awaitable<void> DialRace::wait_decided(std::chrono::steady_clock::time_point until) {
  asio::steady_timer t(ex_);
  auto self = shared_from_this();  // the race outlives this wait
  auto it = decided_waiters_.insert(decided_waiters_.end(), &t);
  while (!decided() && std::chrono::steady_clock::now() < until) {
    t.expires_at(until);
    co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  decided_waiters_.erase(it);
}

void DialRace::cancel_all() {
  for (auto& c : cancel_) c.emit(asio::cancellation_type::terminal);
}

asio::awaitable<Result<DialResult>> DialRace::wait(std::chrono::steady_clock::time_point deadline) {
  while (!winner_ && (running_ > 0 || held_ > 0) && std::chrono::steady_clock::now() < deadline) {
    wake_.expires_at(deadline);
    co_await wake_.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  cancel_all();
  wake_decided_waiters();
  if (winner_) {
    DialResult r = std::move(*winner_);
    winner_.reset();
    taken_ = true;
    co_return r;
  }
  taken_ = true;
  std::string why;
  for (const auto& f : failures_) why += (why.empty() ? "" : "; ") + f;
  if (saw_wrong_peer_)
    co_return fail(errc::peer_mismatch, "the provider's key does not match the link (" + why +
                                            "): the link may be tampered with, or the provider's identity changed");
  // Which command serves the link is the caller's to say (consumer.hpp ConnectOptions::served_by).
  if (running_ > 0 || held_ > 0)
    co_return fail(errc::timeout, "no answer from the provider in time" + (why.empty() ? "" : " (" + why + ")"));
  co_return fail(errc::io_error, "cannot reach the provider (" + why + ")");
}

}  // namespace runsnack
