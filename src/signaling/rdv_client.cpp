#include "signaling/rdv_client.hpp"

#include "core/base32.hpp"
#include "core/log_exceptions.hpp"
#include "net/punch.hpp"
#include "signaling/rdv_io.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>
#include <utility>

namespace runsnack::rdv {

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr milliseconds kConnectTimeout{5000};
constexpr milliseconds kWriteTimeout{5000};
constexpr milliseconds kSilence{35000};  // the server pings every 10 s
constexpr milliseconds kBackoffMin{500};
constexpr milliseconds kBackoffMax{30000};

asio::awaitable<void> provider_punch(tcp::endpoint local, tcp::endpoint remote, Clock::time_point start,
                                     AdoptSocket adopt) {
  auto s = co_await punch(local, remote, start, kPunchAttempts);
  if (!s) {
    spdlog::debug("punch to {}: {}", to_endpoint(remote).str(), s.error().what());
    co_return;
  }
  spdlog::debug("punched a connection to {}", to_endpoint(remote).str());
  adopt(std::move(*s), "punched");
}

asio::awaitable<void> provider_relay(Endpoint server, std::string token, AdoptSocket adopt) {
  auto s = co_await open_relay(server, token, "provider", kRelayMatchWait);
  if (!s) {
    // The rendezvous' refusal says why (its operator's key list, a spent relay budget): the operator should see it.
    if (s.error().is(errc::refused)) spdlog::warn("rendezvous refused the relay: {}", s.error().what());
    else spdlog::debug("relay: {}", s.error().what());
    co_return;
  }
  adopt(std::move(*s), "relayed");
}

Result<tcp::endpoint> to_tcp(const Endpoint& e) {
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(e.host, ec);
  if (ec) return fail(errc::malformed, "not an IP address: " + e.host);
  return tcp::endpoint(addr, e.port);
}

}  // namespace

ProviderAgent::ProviderAgent(asio::any_io_executor ex, AgentConfig config, AdoptSocket adopt)
    : ex_(ex), config_(std::move(config)), adopt_(std::move(adopt)), backoff_(ex) {}

void ProviderAgent::spawn_task(asio::awaitable<void> task, const char* what) {
  auto it = tasks_.emplace(tasks_.end());
  asio::co_spawn(ex_, std::move(task),
                 asio::bind_cancellation_slot(it->slot(), [this, it, what](std::exception_ptr e) {
                   tasks_.erase(it);
                   if (!e || stopping_) return;  // cancelled by stop(): nothing to report
                   log_exceptions(what)(e);
                 }));
}

void ProviderAgent::stop() {
  stopping_ = true;
  backoff_.cancel();
  for (auto& task : tasks_) task.emit(asio::cancellation_type::terminal);
  boost::system::error_code ec;
  if (current_) current_->close(ec);
}

void ProviderAgent::set_mapped(const Endpoint& mapped) {
  config_.mapped = mapped;
  if (std::find(config_.candidates.begin(), config_.candidates.end(), mapped) == config_.candidates.end())
    config_.candidates.insert(config_.candidates.begin(), mapped);
  if (stopping_) return;
  register_again_ = true;
  backoff_.cancel();
  boost::system::error_code ec;
  if (current_) current_->close(ec);
}

asio::awaitable<void> ProviderAgent::run() {
  milliseconds delay = kBackoffMin;
  std::mt19937 rng(std::random_device{}());
  while (!stopping_) {
    auto started = Clock::now();
    register_again_ = false;
    auto r = co_await session();
    if (stopping_) break;
    if (std::exchange(register_again_, false)) {
      delay = kBackoffMin;
      continue;
    }
    std::string why = r ? std::string("closed") : r.error().what();
    if (config_.on_state) config_.on_state("disconnected: " + why);
    if (Clock::now() - started > std::chrono::seconds(30)) delay = kBackoffMin;  // it had worked for a while
    std::uniform_int_distribution<long> jitter(0, delay.count() / 2);
    backoff_.expires_after(delay + milliseconds(jitter(rng)));
    co_await backoff_.async_wait(asio::as_tuple(asio::use_awaitable));
    delay = std::min(delay * 2, kBackoffMax);
  }
}

Result<Prove> prove_registration(const Identity& identity, const std::string& peer, const Challenge& challenge) {
  auto nonce = base32::decode(challenge.nonce);
  if (!nonce || nonce->size() != 32) return fail(errc::malformed, "rendezvous: bad challenge");
  auto sig = identity.sign(registration_proof_message(*nonce, peer));
  if (!sig) return sig.error();
  const auto key = identity.public_key_raw();
  return Prove{base32::encode(key), base32::encode(*sig)};
}

Result<Prove> ProviderAgent::prove(const Challenge& challenge) const {
  if (!config_.identity) return fail(errc::internal, "rendezvous: no identity to prove the PeerId with");
  return prove_registration(*config_.identity, config_.peer, challenge);
}

asio::awaitable<Result<void>> ProviderAgent::session() {
  auto s = co_await connect_endpoint(config_.server, kConnectTimeout, {.reuse_port = true});
  if (!s) co_return s.error();
  tcp::socket socket = std::move(*s);
  current_ = &socket;
  struct Clear {
    tcp::socket** p;
    ~Clear() { *p = nullptr; }
  } clear{&current_};
  boost::system::error_code ec;
  const tcp::endpoint local = socket.local_endpoint(ec);
  if (ec) co_return fail(errc::io_error, ec.message());

  auto make_register = [&] {
    Register reg{config_.peer, config_.grants ? config_.grants() : std::vector<std::string>{}, config_.candidates,
                 config_.mapped};
    if (reg.grants.size() > kMaxGrants) reg.grants.resize(kMaxGrants);
    if (reg.candidates.size() > kMaxCandidates) reg.candidates.resize(kMaxCandidates);
    return reg;
  };
  Register reg = make_register();
  if (auto r = co_await write_message(socket, reg, kWriteTimeout); !r) co_return r.error();
  for (;;) {
    auto m = co_await read_message(socket, kSilence);
    if (!m) co_return m.error();
    if (auto* challenge = std::get_if<Challenge>(&*m)) {
      auto proof = prove(*challenge);
      if (!proof) co_return proof.error();
      const Message answer = *proof;
      if (auto r = co_await write_message(socket, answer, kWriteTimeout); !r) co_return r.error();
    } else if (auto* ok = std::get_if<Registered>(&*m)) {
      if (config_.on_state) config_.on_state("registered " + ok->observed.str());
    } else if (auto* ping = std::get_if<Ping>(&*m)) {
      if (auto r = co_await write_message(socket, Pong{ping->n}, kWriteTimeout); !r) co_return r.error();
      Register fresh = make_register();  // links made or revoked since
      if (fresh.grants != reg.grants) {
        reg = std::move(fresh);
        if (auto r = co_await write_message(socket, reg, kWriteTimeout); !r) co_return r.error();
      }
    } else if (auto* intro = std::get_if<Intro>(&*m)) {
      auto start = Clock::now() + milliseconds(intro->delay_ms);
      if (auto remote = to_tcp(intro->peer_observed)) {
        spawn_task(provider_punch(local, *remote, start, adopt_), "punch");
      }
      if (intro->relay)
        spawn_task(provider_relay(config_.server, intro->token, adopt_), "relay");
    } else if (auto* err = std::get_if<ErrorMsg>(&*m)) {
      co_return fail(errc::refused, "rendezvous: " + err->reason);
    }
  }
}

asio::awaitable<Result<Introduction>> request_introduction(const Endpoint& server, const std::string& peer,
                                                           const std::string& grant, std::vector<Endpoint> candidates,
                                                           milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  auto left = [&] { return std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(deadline - Clock::now())); };
  auto s = co_await connect_endpoint(server, timeout, {.reuse_port = true});
  if (!s) co_return s.error();
  if (candidates.size() > kMaxCandidates) candidates.resize(kMaxCandidates);
  const Message req = Connect{peer, grant, std::move(candidates)};
  if (auto r = co_await write_message(*s, req, left()); !r) co_return r.error();
  for (;;) {
    auto m = co_await read_message(*s, left());
    if (!m) co_return m.error();
    if (auto* ping = std::get_if<Ping>(&*m)) {
      if (auto r = co_await write_message(*s, Pong{ping->n}, left()); !r) co_return r.error();
    } else if (auto* intro = std::get_if<Intro>(&*m)) {
      boost::system::error_code ec;
      auto local = s->local_endpoint(ec);
      if (ec) co_return fail(errc::io_error, ec.message());
      co_return Introduction{std::move(*s), local, std::move(*intro), Clock::now()};
    } else if (auto* err = std::get_if<ErrorMsg>(&*m)) {
      co_return fail(errc::refused, "rendezvous: " + err->reason);
    } else {
      co_return fail(errc::malformed, "rendezvous: unexpected message");
    }
  }
}

asio::awaitable<Result<tcp::socket>> open_relay(const Endpoint& server, const std::string& token,
                                                const std::string& side, milliseconds timeout) {
  auto s = co_await connect_endpoint(server, std::min(timeout, kConnectTimeout));
  if (!s) co_return s.error();
  const Message req = Relay{token, side};
  if (auto r = co_await write_message(*s, req, kWriteTimeout); !r) co_return r.error();
  auto m = co_await read_message(*s, timeout);
  if (!m) co_return m.error();
  if (auto* err = std::get_if<ErrorMsg>(&*m)) co_return fail(errc::refused, "relay: " + err->reason);
  if (!std::holds_alternative<RelayOk>(*m)) co_return fail(errc::malformed, "relay: unexpected message");
  co_return std::move(*s);
}

}  // namespace runsnack::rdv
