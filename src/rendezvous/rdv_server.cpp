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
#include <utility>

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
  std::uint64_t abuse = 0;
  Clock::time_point logged{};
  std::uint64_t refused = 0;  // relay sides refused by the budgets or the key list
  Clock::time_point refusal_logged{};
};

}  // namespace

// One registered provider's signaling connection, as the I/O side sees it.
struct ProviderConn {
  ProviderConn(asio::any_io_executor ex, tcp::socket* s) : wake(ex), socket(s) {}
  asio::steady_timer wake;
  tcp::socket* socket;
  std::deque<std::string> outbox;
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

// Counts one relay side against its IP (RegistryLimits::max_relay_sides_per_ip) while it lives.
struct RelayTicket {
  std::shared_ptr<Server::State> state;
  std::string ip;
  RelayTicket(std::shared_ptr<Server::State> s, std::string i) : state(std::move(s)), ip(std::move(i)) {}
  RelayTicket(RelayTicket&& o) noexcept : state(std::move(o.state)), ip(std::move(o.ip)) {}
  RelayTicket(const RelayTicket&) = delete;
  ~RelayTicket();
};

struct ParkedSide {
  tcp::socket socket;
  Ticket ticket;
  RelayTicket relay;
};

// A spliced pair, as its budgets see it: charged to its provider's key and both sides' addresses.
struct PairBudget {
  std::string peer, ip_a, ip_b;
  std::uint64_t moved = 0;  // both directions
  bool cut = false;         // closed because a budget was spent (logged once)
};

struct Server::State {
  explicit State(asio::any_io_executor e, ServerOptions o)
      : ex(e), options(std::move(o)), registry(options.registry), budgets(options.budgets, options.relay_only_for),
        sweep(e) {}
  asio::any_io_executor ex;
  ServerOptions options;
  Registry registry;
  RelayBudgets budgets;
  asio::steady_timer sweep;
  std::map<std::string, IpCounts> per_ip;
  std::map<ConnId, std::shared_ptr<ProviderConn>> providers;  // registered connections
  std::map<std::uint64_t, ParkedSide> parked;                 // relay sides waiting for their pair, by slot
  std::map<std::uint64_t, std::string> refused;  // slots whose first side was refused: why, for the second
  std::set<tcp::socket*> live;  // every socket a coroutine owns, closed by stop()
  ConnId next_conn = 1;
  std::size_t spliced = 0;
  std::uint64_t relay_bytes = 0;
  std::uint64_t relays_refused = 0;
  std::uint64_t relays_cut = 0;
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
  // A relay side refused by the operator's policy (budgets, key list): logged, at most a line per IP every 10 s.
  void refusal(const std::string& ip, const std::string& why) {
    ++relays_refused;
    auto& c = per_ip[ip];
    ++c.refused;
    auto now = Clock::now();
    if (now - c.refusal_logged >= kAbuseLogEvery) {
      spdlog::warn("rendezvous: relay refused to {}: {} ({} so far)", ip, why, c.refused);
      c.refusal_logged = now;
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
  if (--it->second.connections == 0) state->per_ip.erase(it);
}
RelayTicket::~RelayTicket() {
  if (state) state->registry.relay_side_ended(ip);
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

asio::awaitable<void> provider_reader(StatePtr st, ConnId id, std::shared_ptr<ProviderConn> pc, tcp::socket& s,
                                      std::string ip) {
  const milliseconds silence = 3 * st->options.keepalive;
  for (;;) {
    auto m = co_await read_message(s, silence);
    if (!m) co_return;  // closed, silent for three keepalives, or garbage
    if (auto* pong = std::get_if<Pong>(&*m)) {
      if (pong->n == pc->ping_n)
        st->registry.set_rtt(id, std::chrono::duration_cast<milliseconds>(Clock::now() - pc->ping_sent));
    } else if (auto* reg = std::get_if<Register>(&*m)) {
      if (auto r = st->registry.update(id, *reg); !r) {
        st->abuse(ip, r.error().what());
        co_return;
      }
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
    if (!pc->socket) co_return;  // displaced: the outbox's last words are out
  }
}

asio::awaitable<void> provider_pinger(StatePtr st, std::shared_ptr<ProviderConn> pc) {
  asio::steady_timer t(st->ex);
  for (;;) {
    pc->ping_sent = Clock::now();
    pc->push(Ping{++pc->ping_n});
    t.expires_after(st->options.keepalive);
    auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec || !pc->socket) co_return;
  }
}

// A registration the same key's newer one made room for: told, then closed
// (its agent registers again by itself if it is still alive).
void displace(StatePtr st, ConnId id) {
  auto it = st->providers.find(id);
  if (it == st->providers.end()) return;
  auto pc = it->second;
  st->providers.erase(it);
  if (pc->socket) close_socket(*pc->socket);
  pc->socket = nullptr;
  pc->wake.cancel();
}

asio::awaitable<void> serve_provider(StatePtr st, tcp::socket& s, Register reg, std::string ip) {
  const ConnId id = st->next_conn++;
  struct Forget {
    StatePtr st;
    ConnId id;
    ~Forget() {
      st->registry.remove(id);
      st->providers.erase(id);
    }
  } forget{st, id};
  boost::system::error_code ec;
  const Endpoint observed = to_endpoint(s.remote_endpoint(ec));
  const std::string peer = reg.peer;
  std::array<std::uint8_t, 32> nonce{};
  auto random = random_bytes(nonce.size());
  std::copy(random.begin(), random.end(), nonce.begin());

  // The PeerId is claimed; the key behind it must prove it on this connection.
  auto challenge = st->registry.challenge(id, std::move(reg), ip, observed, nonce);
  if (!challenge) {
    st->abuse(ip, challenge.error().what());
    co_await send_error(s, challenge.error().what());
    co_return;
  }
  const Message challenge_msg = *challenge;
  if (!co_await write_message(s, challenge_msg, kWriteTimeout)) co_return;
  auto answer = co_await read_message(s, st->options.first_message_timeout);
  const Prove* proof = answer ? std::get_if<Prove>(&*answer) : nullptr;
  if (!proof) {
    st->abuse(ip, "registration for " + peer.substr(0, 12) + " without a proof");
    co_await send_error(s, "register: answer the challenge with prove{key,sig} signed by the PeerId's key");
    co_return;
  }
  auto proven = st->registry.prove(id, *proof);
  if (!proven) {
    st->abuse(ip, "registration for " + peer.substr(0, 12) + ": " + proven.error().what());
    co_await send_error(s, "register: " + proven.error().what());
    co_return;
  }
  if (*proven) displace(st, **proven);

  auto pc = std::make_shared<ProviderConn>(st->ex, &s);
  st->providers[id] = pc;
  const Registration* r = st->registry.registration(id);
  spdlog::info("rendezvous: provider {} registered from {} ({}, {} links)", peer.substr(0, 12), observed.str(), ip,
               r ? r->grants.size() : 0);
  pc->push(Registered{observed});
  co_await (provider_reader(st, id, pc, s, ip) || provider_writer(pc, s) || provider_pinger(st, pc));
  pc->socket = nullptr;
  spdlog::info("rendezvous: provider {} gone", peer.substr(0, 12));
}

// ---- consumers ----

struct IntroGuard {
  StatePtr st;
  std::string ip;
  ~IntroGuard() { st->registry.end_intro(ip); }
};

asio::awaitable<void> serve_consumer(StatePtr st, tcp::socket& s, Connect req, std::string ip) {
  if (!st->registry.begin_intro(ip)) {
    st->abuse(ip, "too many pending introductions");
    co_await send_error(s, "too many pending introductions from your address");
    co_return;
  }
  IntroGuard guard{st, ip};
  if (!st->registry.serving(req.peer, req.grant)) {
    st->abuse(ip, "introduction for an unknown provider or link");
    co_await send_error(s, "the provider is not connected to this rendezvous (or the link is not served)");
    co_return;
  }
  // The consumer's RTT, for the synchronised start.
  auto sent = Clock::now();
  if (auto r = co_await write_message(s, Ping{1}, kWriteTimeout); !r) co_return;
  auto pong = co_await read_message(s, milliseconds(3000));
  if (!pong || !std::holds_alternative<Pong>(*pong)) co_return;
  auto rtt_c = std::chrono::duration_cast<milliseconds>(Clock::now() - sent);

  const Registration* r = st->registry.serving(req.peer, req.grant);  // it may have gone while we waited
  auto pc = r ? st->providers.find(r->conn) : st->providers.end();
  if (!r || pc == st->providers.end()) {
    co_await send_error(s, "the provider disconnected from the rendezvous");
    co_return;
  }
  boost::system::error_code ec;
  Endpoint observed_c = to_endpoint(s.remote_endpoint(ec));
  // Each side gets its own relay token; without a relay they are unused.
  RelayTokens tokens{0, new_token(), new_token()};
  if (st->options.relay) {
    auto opened = st->registry.open_relay(r->conn, tokens.provider, tokens.consumer, Clock::now());
    if (!opened) co_return;
  }
  // DCUtR: both sides start when the slower one's message has arrived.
  auto target = std::max(r->rtt, rtt_c) / 2 + st->options.punch_margin;
  Intro to_p{tokens.provider, r->observed, observed_c, req.candidates, (target - r->rtt / 2).count(), r->rtt.count(),
             st->options.relay, std::nullopt};
  Intro to_c{tokens.consumer, observed_c, r->observed, r->candidates, (target - rtt_c / 2).count(), rtt_c.count(),
             st->options.relay, r->mapped};
  pc->second->push(to_p);
  spdlog::info("rendezvous: introducing {} to provider {}", observed_c.str(), req.peer.substr(0, 12));
  if (auto w = co_await write_message(s, to_c, kWriteTimeout); !w) co_return;
  // Hold the connection (and so the consumer's NAT mapping) until it leaves.
  (void)co_await read_message(s, kConsumerHold);
}

// ---- relay ----

// The pair's budgets are spent: both sides closed (the bytes are the peers' TLS,
// so there is no place for a reason; their next relay is refused with it).
void cut_pair(StatePtr st, PairBudget& pair, const std::string& why, tcp::socket& a, tcp::socket& b) {
  if (!std::exchange(pair.cut, true)) {
    ++st->relays_cut;
    spdlog::warn("rendezvous: relay for provider {} ({} <-> {}) closed after {}: {}", pair.peer.substr(0, 12),
                 pair.ip_a, pair.ip_b, bytes_text(pair.moved), why);
  }
  close_socket(a), close_socket(b);
}

asio::awaitable<void> pump(StatePtr st, tcp::socket& from, tcp::socket& to, std::shared_ptr<PairBudget> pair) {
  auto buf = std::make_unique<char[]>(kRelayBuffer);
  const double mbps = st->options.max_relay_mbps;
  auto started = Clock::now();
  std::uint64_t total = 0;
  for (;;) {
    // At most what the pair's budgets still allow, so the pair stops at its budget, not past it.
    const std::uint64_t room = st->budgets.remaining(pair->peer, pair->ip_a, pair->ip_b, Clock::now());
    if (room == 0) {
      auto why = st->budgets.spent(pair->peer, pair->ip_a, pair->ip_b, Clock::now());
      cut_pair(st, *pair, why ? *why : "its relay budget is spent", from, to);
      co_return;
    }
    const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(kRelayBuffer, room));
    auto [rec, n] = co_await from.async_read_some(asio::buffer(buf.get(), want), asio::as_tuple(asio::use_awaitable));
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
    pair->moved += n;
    st->budgets.charge(pair->peer, pair->ip_a, pair->ip_b, n, Clock::now());
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

asio::awaitable<void> splice(StatePtr st, ParkedSide a, tcp::socket& b, std::shared_ptr<PairBudget> pair) {
  LiveGuard guard(st, &a.socket);
  ++st->spliced;
  co_await (pump(st, a.socket, b, pair) && pump(st, b, a.socket, pair));
  --st->spliced;
}

asio::awaitable<void> serve_relay(StatePtr st, tcp::socket& s, Ticket& ticket, Relay req, std::string ip) {
  if (!st->options.relay) {
    co_await send_error(s, "this rendezvous does not relay");
    co_return;
  }
  auto claim = st->registry.claim_relay(req.token, req.side, ip, Clock::now());
  if (!claim) {
    st->abuse(ip, "relay: " + claim.error().what());
    co_await send_error(s, claim.error().what());
    co_return;
  }
  RelayTicket relay(st, ip);
  // The operator's policy: only listed keys, only within their budgets and this address's.
  if (auto why = st->budgets.refuse(claim->peer, ip, std::nullopt, Clock::now())) {
    st->refusal(ip, *why);
    std::optional<ParkedSide> other;
    if (!claim->complete) {
      st->refused.emplace(claim->slot, *why);  // the other side, when it comes, hears the same
    } else if (auto it = st->parked.find(claim->slot); it != st->parked.end()) {
      other.emplace(std::move(it->second));  // the other side, waiting: told and closed
      st->parked.erase(it);
    } else {
      st->refused.erase(claim->slot);  // both sides refused: the slot is gone, and so is its reason
    }
    co_await send_error(s, *why);
    if (other) co_await send_error(other->socket, *why);
    co_return;
  }
  if (!claim->complete) {  // park until the other side arrives or the slot expires
    st->parked.emplace(claim->slot, ParkedSide{std::move(s), std::move(ticket), std::move(relay)});
    co_return;
  }
  if (auto r = st->refused.find(claim->slot); r != st->refused.end()) {  // the first side was refused
    std::string why = std::move(r->second);
    st->refused.erase(r);
    st->refusal(ip, why);
    co_await send_error(s, why);
    co_return;
  }
  auto other = st->parked.find(claim->slot);
  if (other == st->parked.end()) {  // the other side's slot expired a moment ago
    co_await send_error(s, "unknown or spent relay token");
    co_return;
  }
  ParkedSide peer = std::move(other->second);
  st->parked.erase(other);
  // Both addresses are known now: the pair's budgets, all three.
  if (auto why = st->budgets.refuse(claim->peer, ip, peer.ticket.ip, Clock::now())) {
    st->refusal(ip, *why);
    co_await send_error(s, *why);
    co_await send_error(peer.socket, *why);
    co_return;
  }
  bool ok = (co_await write_message(s, RelayOk{}, kWriteTimeout)).has_value() &&
            (co_await write_message(peer.socket, RelayOk{}, kWriteTimeout)).has_value();
  if (!ok) co_return;
  auto pair = std::make_shared<PairBudget>(PairBudget{claim->peer, peer.ticket.ip, ip});
  spdlog::info("rendezvous: relaying for provider {} ({} <-> {})", claim->peer.substr(0, 12), pair->ip_a, pair->ip_b);
  co_await splice(st, std::move(peer), s, std::move(pair));
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
    for (auto slot : st->registry.expire(Clock::now())) st->parked.erase(slot), st->refused.erase(slot);
    st->budgets.expire(Clock::now());
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
  s.providers = state_->registry.providers();
  s.relays_waiting = state_->registry.relay_slots();
  s.relays_spliced = state_->spliced;
  s.relay_bytes = state_->relay_bytes;
  s.budget_keys = state_->budgets.tracked_keys();
  s.budget_addresses = state_->budgets.tracked_addresses();
  s.relays_refused = state_->relays_refused;
  s.relays_cut = state_->relays_cut;
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
  for (auto& [id, pc] : state_->providers) pc->wake.cancel();
  state_->parked.clear();
  state_->refused.clear();
}

}  // namespace runsnack::rdv
