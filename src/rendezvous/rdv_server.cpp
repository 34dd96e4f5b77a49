#include "rendezvous/rdv_server.hpp"

#include "core/log_exceptions.hpp"
#include "core/base32.hpp"
#include "crypto/secret.hpp"
#include "net/punch.hpp"
#include "signaling/rdv_io.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <deque>
#include <optional>
#include <set>

namespace runsnack::rdv {

namespace asio = boost::asio;
using asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr milliseconds kWriteTimeout{5000};
constexpr milliseconds kConsumerHold{30000};  // the consumer's signaling port stays mapped while punching
constexpr std::size_t kRelayBuffer = 32 * 1024;
constexpr std::chrono::seconds kAbuseLogEvery{10};

struct IpCounts {
  std::size_t connections = 0;
  std::size_t intros = 0;
  std::uint64_t abuse = 0;
  Clock::time_point logged{};
};

}  // namespace

struct ProviderConn {
  explicit ProviderConn(asio::any_io_executor ex) : wake(ex) {}
  asio::steady_timer wake;
  std::deque<std::string> outbox;
  Endpoint observed;
  std::vector<std::string> grants;
  std::vector<Endpoint> candidates;
  std::optional<Endpoint> mapped;
  milliseconds rtt{0};
  std::int64_t ping_n = 0;
  Clock::time_point ping_sent{};
  void push(const Message& m) {
    if (outbox.size() >= 64) return;  // a provider that does not read loses introductions, not our memory
    outbox.push_back(encode(m));
    wake.cancel();
  }
};

// Counts one connection against its IP for as long as the socket lives.
struct Ticket {
  std::shared_ptr<Server::State> state;
  std::string ip;
  Ticket(std::shared_ptr<Server::State> s, std::string i);
  Ticket(Ticket&& o) noexcept : state(std::move(o.state)), ip(std::move(o.ip)) {}
  Ticket(const Ticket&) = delete;
  ~Ticket();
};

struct ParkedSide {
  tcp::socket socket;
  Ticket ticket;
};

struct RelaySlot {
  Clock::time_point expires;
  std::optional<ParkedSide> provider;
  std::optional<ParkedSide> consumer;
};

struct Server::State {
  explicit State(asio::any_io_executor e, ServerOptions o) : ex(e), options(std::move(o)), sweep(e) {}
  asio::any_io_executor ex;
  ServerOptions options;
  asio::steady_timer sweep;
  std::map<std::string, IpCounts> per_ip;
  std::map<std::string, std::shared_ptr<ProviderConn>> providers;
  std::map<std::string, RelaySlot> relays;
  std::set<tcp::socket*> live;  // every socket a coroutine owns, closed by stop()
  std::size_t spliced = 0;
  std::uint64_t relay_bytes = 0;
  bool stopping = false;

  void abuse(const std::string& ip, const std::string& what) {
    auto& c = per_ip[ip];
    ++c.abuse;
    auto now = Clock::now();
    if (now - c.logged >= kAbuseLogEvery) {
      spdlog::warn("rendezvous: abuse from {}: {} ({} so far)", ip, what, c.abuse);
      c.logged = now;
    }
  }
};

Ticket::Ticket(std::shared_ptr<Server::State> s, std::string i) : state(std::move(s)), ip(std::move(i)) {
  ++state->per_ip[ip].connections;
}
Ticket::~Ticket() {
  if (!state) return;
  auto it = state->per_ip.find(ip);
  if (it == state->per_ip.end()) return;
  if (--it->second.connections == 0 && it->second.intros == 0) state->per_ip.erase(it);
}

namespace {

using StatePtr = std::shared_ptr<Server::State>;

struct LiveGuard {
  StatePtr st;
  tcp::socket* s;
  LiveGuard(StatePtr state, tcp::socket* sock) : st(std::move(state)), s(sock) { st->live.insert(s); }
  ~LiveGuard() { st->live.erase(s); }
};

std::string new_token() {
  std::string t = base32::encode(random_bytes(16));
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  t.resize(kTokenLength);
  return t;
}

void close_socket(tcp::socket& s) {
  boost::system::error_code ignored;
  s.shutdown(tcp::socket::shutdown_both, ignored);
  s.close(ignored);
}

asio::awaitable<void> send_error(tcp::socket& s, std::string reason) {
  const Message m = ErrorMsg{std::move(reason)};
  (void)co_await write_message(s, m, kWriteTimeout);
}

// ---- providers ----

asio::awaitable<void> provider_reader(StatePtr st, std::shared_ptr<ProviderConn> pc, tcp::socket& s) {
  const milliseconds silence = 3 * st->options.keepalive;
  for (;;) {
    auto m = co_await read_message(s, silence);
    if (!m) co_return;  // closed, silent for three keepalives, or garbage
    if (auto* pong = std::get_if<Pong>(&*m)) {
      if (pong->n == pc->ping_n)
        pc->rtt = std::chrono::duration_cast<milliseconds>(Clock::now() - pc->ping_sent);
    } else if (auto* reg = std::get_if<Register>(&*m)) {
      pc->grants = reg->grants;
      pc->candidates = reg->candidates;
      pc->mapped = reg->mapped;
    } else {
      co_return;
    }
  }
}

asio::awaitable<void> provider_writer(std::shared_ptr<ProviderConn> pc, tcp::socket& s) {
  for (;;) {
    while (!pc->outbox.empty()) {
      std::string frame = std::move(pc->outbox.front());
      pc->outbox.pop_front();
      if (auto r = co_await write_frame(s, frame, kWriteTimeout); !r) co_return;
    }
    pc->wake.expires_at(Clock::time_point::max());
    co_await pc->wake.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

asio::awaitable<void> provider_pinger(StatePtr st, std::shared_ptr<ProviderConn> pc) {
  asio::steady_timer t(st->ex);
  for (;;) {
    pc->ping_sent = Clock::now();
    pc->push(Ping{++pc->ping_n});
    t.expires_after(st->options.keepalive);
    auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
  }
}

asio::awaitable<void> serve_provider(StatePtr st, tcp::socket& s, Register reg, std::string ip) {
  if (st->providers.size() >= st->options.max_providers && !st->providers.count(reg.peer)) {
    co_await send_error(s, "rendezvous full");
    co_return;
  }
  auto pc = std::make_shared<ProviderConn>(st->ex);
  boost::system::error_code ec;
  pc->observed = to_endpoint(s.remote_endpoint(ec));
  pc->grants = std::move(reg.grants);
  pc->candidates = std::move(reg.candidates);
  pc->mapped = reg.mapped;
  // A reconnecting provider replaces its old registration.
  st->providers[reg.peer] = pc;
  spdlog::info("rendezvous: provider {} registered from {} ({}, {} links)", reg.peer.substr(0, 12),
               pc->observed.str(), ip, pc->grants.size());
  pc->push(Registered{pc->observed});
  co_await (provider_reader(st, pc, s) || provider_writer(pc, s) || provider_pinger(st, pc));
  auto it = st->providers.find(reg.peer);
  if (it != st->providers.end() && it->second == pc) st->providers.erase(it);
  spdlog::info("rendezvous: provider {} gone", reg.peer.substr(0, 12));
}

// ---- consumers ----

struct IntroGuard {
  StatePtr st;
  std::string ip;
  IntroGuard(StatePtr s, std::string i) : st(std::move(s)), ip(std::move(i)) { ++st->per_ip[ip].intros; }
  ~IntroGuard() {
    auto it = st->per_ip.find(ip);
    if (it != st->per_ip.end() && it->second.intros > 0) --it->second.intros;
  }
};

asio::awaitable<void> serve_consumer(StatePtr st, tcp::socket& s, Connect req, std::string ip) {
  if (st->per_ip[ip].intros >= st->options.max_pending_intros_per_ip) {
    st->abuse(ip, "too many pending introductions");
    co_await send_error(s, "too many pending introductions from your address");
    co_return;
  }
  auto it = st->providers.find(req.peer);
  if (it == st->providers.end() ||
      std::find(it->second->grants.begin(), it->second->grants.end(), req.grant) == it->second->grants.end()) {
    st->abuse(ip, "introduction for an unknown provider or link");
    co_await send_error(s, "the provider is not connected to this rendezvous (or the link is not served)");
    co_return;
  }
  IntroGuard guard(st, ip);
  // The consumer's RTT, for the synchronised start.
  auto sent = Clock::now();
  if (auto r = co_await write_message(s, Ping{1}, kWriteTimeout); !r) co_return;
  auto pong = co_await read_message(s, milliseconds(3000));
  if (!pong || !std::holds_alternative<Pong>(*pong)) co_return;
  auto rtt_c = std::chrono::duration_cast<milliseconds>(Clock::now() - sent);

  it = st->providers.find(req.peer);  // it may have gone while we waited
  if (it == st->providers.end()) {
    co_await send_error(s, "the provider disconnected from the rendezvous");
    co_return;
  }
  auto pc = it->second;
  boost::system::error_code ec;
  Endpoint observed_c = to_endpoint(s.remote_endpoint(ec));
  std::string token = new_token();
  if (st->options.relay) st->relays.try_emplace(token).first->second.expires = Clock::now() + st->options.relay_match_timeout;
  // DCUtR: both sides start when the slower one's message has arrived.
  auto target = std::max(pc->rtt, rtt_c) / 2 + st->options.punch_margin;
  Intro to_p{token, pc->observed, observed_c, req.candidates, (target - pc->rtt / 2).count(), pc->rtt.count(),
             st->options.relay, std::nullopt};
  Intro to_c{token, observed_c, pc->observed, pc->candidates, (target - rtt_c / 2).count(), rtt_c.count(),
             st->options.relay, pc->mapped};
  pc->push(to_p);
  spdlog::info("rendezvous: introducing {} to provider {}", observed_c.str(), req.peer.substr(0, 12));
  if (auto r = co_await write_message(s, to_c, kWriteTimeout); !r) co_return;
  // Hold the connection (and so the consumer's NAT mapping) until it leaves.
  (void)co_await read_message(s, kConsumerHold);
}

// ---- relay ----

asio::awaitable<void> pump(StatePtr st, tcp::socket& from, tcp::socket& to) {
  auto buf = std::make_unique<char[]>(kRelayBuffer);
  const double mbps = st->options.max_relay_mbps;
  auto started = Clock::now();
  std::uint64_t total = 0;
  for (;;) {
    auto [rec, n] = co_await from.async_read_some(asio::buffer(buf.get(), kRelayBuffer),
                                                  asio::as_tuple(asio::use_awaitable));
    if (rec) {
      boost::system::error_code ignored;
      if (rec == asio::error::eof) to.shutdown(tcp::socket::shutdown_send, ignored);
      else close_socket(to), close_socket(from);
      co_return;
    }
    asio::steady_timer timer(st->ex, st->options.relay_write_timeout);
    auto w = co_await (asio::async_write(to, asio::buffer(buf.get(), n), asio::as_tuple(asio::use_awaitable)) ||
                       timer.async_wait(asio::as_tuple(asio::use_awaitable)));
    if (w.index() == 1 || std::get<0>(std::get<0>(w))) {
      if (w.index() == 1) spdlog::warn("rendezvous: relay side stopped reading; closing the pair");
      close_socket(to), close_socket(from);
      co_return;
    }
    total += n;
    st->relay_bytes += n;
    if (st->options.max_relay_bytes > 0 && total >= st->options.max_relay_bytes) {
      spdlog::warn("rendezvous: relayed pair reached its limit of {} bytes; closing it", st->options.max_relay_bytes);
      close_socket(to), close_socket(from);
      co_return;
    }
    if (mbps > 0) {
      auto due = started + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(static_cast<double>(total) * 8 / (mbps * 1e6)));
      if (due > Clock::now()) {
        timer.expires_at(due);
        co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
      }
    }
  }
}

asio::awaitable<void> splice(StatePtr st, ParkedSide a, tcp::socket& b) {
  LiveGuard guard(st, &a.socket);
  ++st->spliced;
  co_await (pump(st, a.socket, b) && pump(st, b, a.socket));
  --st->spliced;
}

asio::awaitable<void> serve_relay(StatePtr st, tcp::socket& s, Ticket& ticket, Relay req, std::string ip) {
  if (!st->options.relay) {
    co_await send_error(s, "this rendezvous does not relay");
    co_return;
  }
  auto it = st->relays.find(req.token);
  if (it == st->relays.end() || it->second.expires < Clock::now()) {
    st->abuse(ip, "unknown or spent relay token");
    co_await send_error(s, "unknown or spent relay token");
    co_return;
  }
  auto& slot = it->second;
  auto& mine = req.side == "provider" ? slot.provider : slot.consumer;
  auto& other = req.side == "provider" ? slot.consumer : slot.provider;
  if (mine) {
    st->abuse(ip, "second " + req.side + " side for one relay token");
    co_await send_error(s, "this relay side is taken");
    co_return;
  }
  if (!other) {  // park until the other side arrives or the slot expires
    mine.emplace(ParkedSide{std::move(s), std::move(ticket)});
    co_return;
  }
  ParkedSide peer = std::move(*other);
  st->relays.erase(it);  // the token is spent: nobody else can join
  bool ok = (co_await write_message(s, RelayOk{}, kWriteTimeout)).has_value() &&
            (co_await write_message(peer.socket, RelayOk{}, kWriteTimeout)).has_value();
  if (!ok) co_return;
  co_await splice(st, std::move(peer), s);
}

asio::awaitable<void> serve(StatePtr st, tcp::socket s, Ticket ticket) {
  LiveGuard guard(st, &s);
  const std::string ip = ticket.ip;
  auto first = co_await read_message(s, st->options.first_message_timeout);
  if (!first) {
    if (!first.error().is(errc::closed)) st->abuse(ip, "first message: " + first.error().what());
    co_return;
  }
  if (auto* reg = std::get_if<Register>(&*first)) {
    co_await serve_provider(st, s, std::move(*reg), ip);
  } else if (auto* con = std::get_if<Connect>(&*first)) {
    co_await serve_consumer(st, s, std::move(*con), ip);
  } else if (auto* rel = std::get_if<Relay>(&*first)) {
    co_await serve_relay(st, s, ticket, std::move(*rel), ip);
  } else {
    st->abuse(ip, "unexpected first message");
  }
}

asio::awaitable<void> sweep_loop(StatePtr st) {
  while (!st->stopping) {
    st->sweep.expires_after(std::chrono::seconds(1));
    co_await st->sweep.async_wait(asio::as_tuple(asio::use_awaitable));
    auto now = Clock::now();
    std::erase_if(st->relays, [&](const auto& kv) { return kv.second.expires < now; });
  }
}

}  // namespace

Server::Server(asio::any_io_executor ex, ServerOptions options)
    : ex_(ex), options_(options), acceptor_(ex), state_(std::make_shared<State>(ex, std::move(options))) {}

Server::~Server() {
  stop();
  state_->live.clear();
}

Result<void> Server::listen() {
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(options_.listen_address, ec);
  if (ec) return fail(errc::invalid_argument, "bad listen address '" + options_.listen_address + "'");
  tcp::endpoint ep(addr, options_.port);
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return fail(errc::io_error, "listen on " + to_endpoint(ep).str() + ": " + ec.message());
  return {};
}

tcp::endpoint Server::local_endpoint() const { return acceptor_.local_endpoint(); }

ServerStats Server::stats() const {
  ServerStats s;
  s.connections = state_->live.size();
  s.providers = state_->providers.size();
  s.relays_waiting = state_->relays.size();
  s.relays_spliced = state_->spliced;
  s.relay_bytes = state_->relay_bytes;
  return s;
}

asio::awaitable<void> Server::run() {
  asio::co_spawn(ex_, sweep_loop(state_), log_exceptions("sweeper"));
  while (!state_->stopping) {
    auto [ec, socket] = co_await acceptor_.async_accept(asio::as_tuple(asio::use_awaitable));
    if (state_->stopping) break;
    if (ec) {
      spdlog::warn("rendezvous: accept: {}", ec.message());
      asio::steady_timer pause(ex_, milliseconds(100));
      co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
      continue;
    }
    boost::system::error_code rec;
    std::string ip = socket.remote_endpoint(rec).address().to_string();
    if (rec) continue;
    if (state_->per_ip[ip].connections >= options_.max_connections_per_ip) {
      state_->abuse(ip, "too many connections");
      continue;  // closed as it goes out of scope
    }
    socket.set_option(tcp::no_delay(true), rec);
    Ticket ticket(state_, ip);
    asio::co_spawn(ex_, serve(state_, std::move(socket), std::move(ticket)), log_exceptions("connection"));
  }
}

void Server::stop() {
  state_->stopping = true;
  boost::system::error_code ec;
  acceptor_.close(ec);
  state_->sweep.cancel();
  for (auto* s : state_->live) close_socket(*s);
  for (auto& [peer, pc] : state_->providers) pc->wake.cancel();
  state_->relays.clear();
}

}  // namespace runsnack::rdv
