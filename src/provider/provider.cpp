#include "provider/provider.hpp"

#include "core/address_key.hpp"
#include "core/log_exceptions.hpp"
#include "core/base32.hpp"
#include "core/json_fields.hpp"
#include "crypto/secret.hpp"
#include "crypto/tls.hpp"
#include "net/tcp_tuning.hpp"
#include "net/tls_stream.hpp"
#include "net/transport.hpp"
#include "provider/admission.hpp"
#include "session/goodbye_exchange.hpp"
#include "session/handshake.hpp"
#include "session/session.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <array>
#include <set>
#include <unistd.h>

namespace runsnack {

namespace asio = boost::asio;
using asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;

struct Provider::LiveSession {
  std::string id;
  PeerId consumer;
  std::string address;
  std::string address_key;  // core/address_key.hpp, empty when relayed (not counted per address)
  std::string path;  // how the consumer reached us: direct, punched, relayed
  Grant grant;
  std::shared_ptr<Mux> mux;
  std::chrono::steady_clock::time_point opened = std::chrono::steady_clock::now();
  std::string end_reason;  // set when the provider ends it
  std::string ended;       // why, in a word (session/goodbye.hpp: kEnded*), with end_reason
  bool hears_goodbye = false;  // its consumer said so in its grant proof
  std::set<std::string> services_noted;  // in its `sessions` row (store/session_store.hpp)
};

namespace {

asio::ssl::context make_server_tls(const Identity& identity) {
  auto ctx = make_tls_context(identity, TlsRole::server);
  if (!ctx) throw std::runtime_error(ctx.error().what());
  return asio::ssl::context(*ctx);
}

// After a refusal: our FIN, then what the consumer sends is read and dropped until it closes (at
// most kRefusedLinger and kRefusedDrainBytes). Closed with its bytes unread, the kernel answers the
// consumer with a reset, and a consumer that sent requests right behind its proof (the pipelined
// proof) could lose the refusal to it: its next write fails and ends its session before it has
// read our answer.
constexpr auto kRefusedLinger = std::chrono::seconds(1);
constexpr std::size_t kRefusedDrainBytes = 1 << 20;

asio::awaitable<void> close_after_refusal(TlsStream& stream) {
  auto& socket = stream.next_layer();
  boost::system::error_code ec;
  socket.shutdown(tcp::socket::shutdown_send, ec);
  if (ec) co_return;
  auto drain = [&]() -> asio::awaitable<void> {
    std::array<char, 16384> sink;
    for (std::size_t drained = 0; drained < kRefusedDrainBytes;) {
      auto [read_ec, n] = co_await socket.async_read_some(asio::buffer(sink), asio::as_tuple(asio::use_awaitable));
      if (read_ec) co_return;
      drained += n;
    }
  };
  asio::steady_timer timer(socket.get_executor(), kRefusedLinger);
  co_await (drain() || timer.async_wait(asio::as_tuple(asio::use_awaitable)));
}

std::string endpoint_text(const tcp::socket& s) {
  boost::system::error_code ec;
  auto ep = s.remote_endpoint(ec);
  if (ec) return "?";
  return Endpoint{ep.address().to_string(), ep.port()}.str();
}

// A command's row in the sessions table while it runs (session/command_record.hpp). Rows
// are written only while the Provider (and so the store) lives: `alive` expires with it.
class StoredCommand final : public CommandRecord {
 public:
  StoredCommand(SessionStore& store, std::weak_ptr<char> alive, CommandRow row)
      : store_(store), alive_(std::move(alive)), row_(std::move(row)) {
    add();
  }
  ~StoredCommand() override { remove(); }
  void moved_to(const std::string& session_id) override {
    remove();
    row_.session_id = session_id;
    add();
  }

 private:
  void add() {
    if (alive_.expired()) return;
    auto id = store_.add_command(row_);
    if (!id) spdlog::warn("sessions table: {}", id.error().what());
    row_.id = id ? *id : -1;  // -1: nothing to remove
  }
  void remove() {
    if (alive_.expired() || row_.id < 0) return;
    if (auto r = store_.remove_command(row_.id, row_.session_id); !r)
      spdlog::warn("sessions table: {}", r.error().what());
    row_.id = -1;
  }
  SessionStore& store_;
  std::weak_ptr<char> alive_;
  CommandRow row_;
};

}  // namespace

Provider::Provider(asio::any_io_executor ex, const Identity& identity, Database& db, ProviderOptions options,
                   ServiceRouter services, ProviderEventSink on_event)
    : ex_(ex),
      options_(std::move(options)),
      services_(std::move(services)),
      on_event_(std::move(on_event)),
      tls_(make_server_tls(identity)),
      grants_(db),
      audit_(db),
      session_rows_(db),
      acceptor_(ex),
      watch_timer_(ex),
      audit_timer_(ex),
      slots_(options_.max_pending_per_address, options_.max_pending),
      refusals_(options_.refusal_interval),
      abandoned_(options_.refusal_interval) {}

// Records queued after stop() (connections ending as their sessions close).
Provider::~Provider() {
  flush_refusals(true);
  flush_audit();
}

Result<void> Provider::listen() {
  auto acceptor = listen_tcp(ex_, options_.listen_address, options_.ports);
  if (!acceptor) return acceptor.error();
  acceptor_ = std::move(*acceptor);
  return {};
}

tcp::endpoint Provider::local_endpoint() const { return acceptor_.local_endpoint(); }

std::vector<Endpoint> Provider::candidates() const { return local_candidates(acceptor_.local_endpoint()); }

ProviderStats Provider::stats() const {
  ProviderStats s;
  s.sessions = sessions_.size();
  s.bytes_in = closed_bytes_in_;
  s.bytes_out = closed_bytes_out_;
  for (const auto& [id, live] : sessions_) {
    s.bytes_in += live->mux->bytes_in();
    s.bytes_out += live->mux->bytes_out();
  }
  return s;
}

void Provider::audit(AuditEvent ev) {
  if (auto r = audit_.append(ev); !r) spdlog::error("audit log: {}", r.error().what());
}

void Provider::audit_batched(AuditEvent ev) {
  audit_queue_.push_back(std::move(ev));
  if (audit_queue_.size() >= kAuditBatchMax || stopping_) {
    flush_audit();
    return;
  }
  if (audit_timer_armed_) return;
  audit_timer_armed_ = true;
  audit_timer_.expires_after(kAuditBatchDelay);
  // An expiry already queued is not cancelled: `alive` tells whether `this` still is.
  audit_timer_.async_wait([this, alive = std::weak_ptr<char>(audit_alive_)](const boost::system::error_code& ec) {
    if (ec || alive.expired()) return;  // stop() or the destructor wrote the queue
    audit_timer_armed_ = false;
    flush_audit();
  });
}

void Provider::flush_audit() {
  if (audit_queue_.empty()) return;
  if (auto r = audit_.append(std::span<const AuditEvent>(audit_queue_)); !r) {
    // The database is busy or broken: one at a time keeps what can be kept.
    spdlog::warn("audit log: batch of {}: {}; writing one by one", audit_queue_.size(), r.error().what());
    for (const auto& ev : audit_queue_) audit(ev);
  }
  audit_queue_.clear();
}

bool Provider::audit_refusal(AuditEvent ev, const std::string& key) {
  auto now = refusals_.note(std::move(ev), key);
  if (now) audit(std::move(*now));
  return now.has_value();
}

void Provider::flush_refusals(bool all) {
  auto gone = abandoned_.due(std::chrono::system_clock::now(), all);
  if (!gone.empty())
    if (auto r = audit_.append(std::span<const AuditEvent>(gone)); !r) spdlog::error("audit log: {}", r.error().what());
  auto due = refusals_.due(std::chrono::system_clock::now(), all);
  if (due.empty()) return;
  if (auto r = audit_.append(std::span<const AuditEvent>(due)); !r) spdlog::error("audit log: {}", r.error().what());
  for (const auto& ev : due)
    if (ev.kind != "service" && on_event_)
      on_event_({{"event", "refused"}, {"address", ev.address}, {"peer", ev.peer}, {"reason", ev.reason},
                 {"count", int_or(ev.detail, "count", 0)}});
}

void Provider::prune_audit() {
  pruned_at_ = std::chrono::steady_clock::now();
  auto gone = audit_.prune(std::chrono::system_clock::now() - kAuditKeepAge, kAuditKeepRows);
  if (!gone) spdlog::warn("audit log: pruning: {}", gone.error().what());
  else if (*gone > 0) spdlog::info("audit log: pruned {} old records", *gone);
}

void Provider::evict(std::uint64_t slot) {
  auto it = handshaking_.find(slot);
  if (it == handshaking_.end()) return;
  evicted_[slot] = true;
  boost::system::error_code ignored;
  it->second->lowest_layer().close(ignored);  // its handshake or auth read fails at once
  handshaking_.erase(it);
}

void Provider::refused(const std::string& address, const std::string& peer, const std::string& reason) {
  if (on_event_) on_event_({{"event", "refused"}, {"address", address}, {"peer", peer}, {"reason", reason}});
}

asio::awaitable<void> Provider::run() {
  prune_audit();
  if (auto r = session_rows_.prune_dead(); !r) spdlog::warn("sessions table: {}", r.error().what());
  co_await (accept_loop() && watch_loop());
}

void Provider::stop() {
  stopping_ = true;
  boost::system::error_code ec;
  acceptor_.close(ec);
  watch_timer_.cancel();
  audit_timer_.cancel();
  audit_timer_armed_ = false;
  flush_refusals(true);
  flush_audit();
  for (auto& [slot, stream] : handshaking_) {
    boost::system::error_code ignored;
    stream->lowest_layer().close(ignored);
  }
  for (auto& [id, live] : sessions_)
    if (live->end_reason.empty()) end_session(*live, kEndedProviderStopped, "the provider stopped sharing");
}

asio::awaitable<void> Provider::accept_loop() {
  while (!stopping_) {
    auto [ec, socket] = co_await acceptor_.async_accept(asio::as_tuple(asio::use_awaitable));
    if (stopping_) break;
    if (ec) {
      // Out of file descriptors and the like: back off instead of spinning.
      spdlog::warn("accept: {}", ec.message());
      asio::steady_timer pause(ex_, std::chrono::milliseconds(100));
      co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
      continue;
    }
    asio::co_spawn(ex_, handle_connection(std::move(socket), "direct"), log_exceptions("connection"));
  }
}

void Provider::adopt(tcp::socket socket, std::string path) {
  if (stopping_) return;
  asio::co_spawn(ex_, handle_connection(std::move(socket), std::move(path)), log_exceptions("connection"));
}

asio::awaitable<void> Provider::watch_loop() {
  while (!stopping_) {
    watch_timer_.expires_after(options_.watch_interval);
    co_await watch_timer_.async_wait(asio::as_tuple(asio::use_awaitable));
    if (stopping_) break;
    auto now = std::chrono::system_clock::now();
    flush_refusals(false);
    if (std::chrono::steady_clock::now() - pruned_at_ > std::chrono::hours(1)) prune_audit();
    end_kicked_sessions();
    for (auto& [id, live] : sessions_) {
      if (!live->end_reason.empty()) continue;
      auto fresh = grants_.find(live->grant.id);
      if (!fresh) continue;  // database busy: try again next tick
      if (!*fresh) {
        end_session(*live, kEndedDeleted, "link deleted");
        continue;
      }
      live->grant = **fresh;
      if (auto end = check_live_session(live->grant, now))
        end_session(*live, end->code == errc::revoked ? kEndedRevoked : kEndedExpired, end->reason);
    }
  }
}

void Provider::end_kicked_sessions() {
  if (sessions_.empty()) return;
  auto kicked = session_rows_.kicked(::getpid());
  if (!kicked) return;  // database busy: try again next tick
  for (const auto& id : *kicked)
    if (auto it = sessions_.find(id); it != sessions_.end() && it->second->end_reason.empty())
      end_session(*it->second, kEndedKicked, "ended by `runsnack kick`");
}

void Provider::end_session(LiveSession& live, const char* ended, const std::string& reason) {
  live.end_reason = reason;
  live.ended = ended;
  // A consumer that hears goodbyes learns why before the session closes; to an older one it just closes.
  if (live.hears_goodbye)
    asio::co_spawn(ex_, say_goodbye(live.mux, Goodbye{ended, reason}, kGoodbyeWait), log_exceptions("goodbye"));
  else
    live.mux->close();
}

asio::awaitable<void> Provider::handle_connection(tcp::socket socket, std::string path) {
  // A relayed connection comes from the rendezvous' address; say so. All
  // relayed consumers share that address's slots.
  const std::string address = path == "relayed" ? "relay " + endpoint_text(socket) : endpoint_text(socket);
  boost::system::error_code ec;
  auto remote = socket.remote_endpoint(ec);
  const std::string key = (path == "relayed" ? "relay " : "") + (ec ? address : address_key(remote.address()));
  socket.set_option(tcp::no_delay(true), ec);
  cap_retransmit_backoff(socket);  // resume within ~1 s of an outage's end

  auto stream = std::make_unique<TlsStream>(std::move(socket), tls_);
  auto taken = slots_.take(key);
  if (taken.evict) evict(*taken.evict);
  handshaking_[taken.slot] = stream.get();
  struct SlotGuard {
    Provider* p;
    std::uint64_t slot;
    bool armed = true;
    void release() {
      if (!armed) return;
      armed = false;
      p->slots_.release(slot);
      p->handshaking_.erase(slot);
      p->evicted_.erase(slot);
    }
    ~SlotGuard() { release(); }
  } pending{this, taken.slot};
  auto unproven = [&](const char* kind, const std::string& peer, std::string why, nlohmann::json detail) {
    if (pending.armed && evicted_.contains(taken.slot))
      why = "closed to make room: more than " + std::to_string(options_.max_pending_per_address) +
            " connections from this address were still handshaking (" + why + ")";
    // Only the first of an address's interval is told at once; the rest come counted (flush_refusals).
    if (audit_refusal({std::chrono::system_clock::now(), kind, "", peer, address, "refuse", why, std::move(detail)}, key))
      refused(address, peer, why);
  };
  // Closed by the peer before it said anything (a dial race's loser): counted, not refused.
  auto abandoned = [&] {
    if (evicted_.contains(taken.slot)) return false;  // we closed it: that is a refusal, with its reason
    abandoned_.note(std::chrono::system_clock::now(), key, path);
    return true;
  };

  // One deadline for the TLS handshake and the auth message together.
  const auto deadline = std::chrono::steady_clock::now() + options_.handshake_timeout;
  asio::steady_timer timer(ex_, deadline);
  auto hs = co_await (stream->async_handshake(asio::ssl::stream_base::server, asio::as_tuple(asio::use_awaitable)) ||
                      timer.async_wait(asio::as_tuple(asio::use_awaitable)));
  std::string tls_failure;
  if (hs.index() == 1) tls_failure = "TLS handshake timed out";
  else if (auto [hs_ec] = std::get<0>(hs); hs_ec) {
    if (closed_by_peer(hs_ec) && abandoned()) co_return;
    tls_failure = "TLS handshake failed: " + hs_ec.message();
  }
  if (!tls_failure.empty()) {
    unproven("connect", "", tls_failure, {{"path", path}});
    co_return;
  }
  auto consumer = peer_of(stream->native_handle());
  auto binding = channel_binding(stream->native_handle());
  if (!consumer || !binding) co_return;  // cannot happen after a verified handshake

  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  auto hello = co_await read_auth_hello(*stream, std::max(left, std::chrono::milliseconds(1)));
  if (!hello) {
    if (hello.error().is(errc::closed) && abandoned()) co_return;
    unproven("auth", consumer->str(), "bad auth message: " + hello.error().what(), nullptr);
    co_return;
  }

  // Relayed consumers all come from the rendezvous' address: only the total bounds them.
  const std::string per_address_key = path == "relayed" ? "" : key;
  Admitter admitter(
      grants_, audit_, SystemClock::instance(),
      [this, &per_address_key](const std::string& grant_id) {
        LiveSessionCounts n;
        n.total = static_cast<std::int64_t>(sessions_.size());
        for (const auto& [id, live] : sessions_) {
          n.on_grant += live->grant.id == grant_id;
          n.from_address += !per_address_key.empty() && live->address_key == per_address_key;
        }
        return n;
      },
      options_.sessions,
      [this, &key](AuditEvent ev) {
        std::string address = ev.address, peer = ev.peer, reason = ev.reason;
        if (audit_refusal(std::move(ev), key)) refused(address, peer, reason);
      });
  std::string session_id = base32::encode(random_bytes(8));
  Admission admission = admitter.admit({*consumer, address, *hello, *binding}, session_id);
  (void)co_await send_auth_reply(*stream, admission.reply);
  if (!admission.reply.ok) {
    if (!admission.unproven) refused(address, consumer->str(), admission.reply.reason);
    co_await close_after_refusal(*stream);
    co_return;
  }
  pending.release();

  auto live = std::make_shared<LiveSession>();
  live->id = session_id;
  live->consumer = *consumer;
  live->address = address;
  live->address_key = per_address_key;
  live->path = path;
  live->grant = *admission.grant;
  live->hears_goodbye = hello->hears_goodbye;
  live->mux = Mux::create(make_tls_transport(std::move(stream)), yamux::Role::server);
  sessions_[session_id] = live;
  if (auto r = session_rows_.add({session_id, live->grant.id, consumer->str(), address, path, {},
                                  std::chrono::system_clock::now(), ::getpid(), false, {}, 0});
      !r)
    spdlog::warn("sessions table: {}", r.error().what());
  if (on_event_)
    on_event_({{"event", "session_open"}, {"session", session_id}, {"grant", live->grant.id},
               {"peer", consumer->str()}, {"address", address}, {"path", path}});
  audit({std::chrono::system_clock::now(), "session_open", live->grant.id, consumer->str(), address, "accept", "",
         {{"session", session_id}, {"path", path}}});
  co_await serve_session(live);
}

asio::awaitable<void> Provider::serve_session(std::shared_ptr<LiveSession> live) {
  auto accept_streams = [this, live]() -> asio::awaitable<void> {
    for (;;) {
      auto stream = co_await live->mux->accept_stream();
      if (!stream) co_return;
      asio::co_spawn(ex_, handle_stream(live, std::move(*stream)), log_exceptions("stream"));
    }
  };
  co_await (live->mux->run() && accept_streams());

  sessions_.erase(live->id);
  if (auto r = session_rows_.remove(live->id); !r) spdlog::warn("sessions table: {}", r.error().what());
  closed_bytes_in_ += live->mux->bytes_in();
  closed_bytes_out_ += live->mux->bytes_out();
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - live->opened).count();
  std::string reason = live->end_reason.empty() ? "closed by the consumer" : live->end_reason;
  // "ended": kicked, revoked, expired, deleted, provider_stopped (session/goodbye.hpp), or consumer.
  nlohmann::json detail = {{"session", live->id}, {"path", live->path}, {"seconds", seconds}, {"bytes_in", live->mux->bytes_in()},
                           {"bytes_out", live->mux->bytes_out()}, {"ended", live->ended.empty() ? "consumer" : live->ended}};
  audit({std::chrono::system_clock::now(), "session_close", live->grant.id, live->consumer.str(), live->address, "",
         reason, detail});
  if (on_event_) {
    detail["event"] = "session_closed";
    detail["grant"] = live->grant.id;
    detail["peer"] = live->consumer.str();
    detail["reason"] = reason;
    on_event_(detail);
  }
}

asio::awaitable<void> Provider::handle_stream(std::shared_ptr<LiveSession> live, std::shared_ptr<MuxStream> stream) {
  stream->set_peer_name(live->consumer.str());  // its file work shares the offload pool as this consumer's
  auto msg = co_await read_stream_message(*stream);
  auto header = msg ? parse_stream_header(*msg) : Result<StreamHeader>(msg.error());
  if (!header) {
    spdlog::warn("session {}: bad stream header: {}", live->id, header.error().what());
    stream->reset();
    co_return;
  }
  const ServiceEntry* entry = services_.find(header->service);
  StreamReply reply{true, errc::ok, ""};
  if (!entry) {
    reply = {false, errc::unsupported, "this provider has no service '" + header->service + "'"};
  } else if (!grant_allows_service(live->grant, entry->requires_grant_service)) {
    reply = {false, errc::refused, "the link does not allow '" + header->service + "'"};
  }
  if (!entry || entry->audited || !reply.ok) {
    AuditEvent ev{std::chrono::system_clock::now(), "service", live->grant.id, live->consumer.str(), live->address,
                  reply.ok ? "accept" : "refuse", reply.reason, {{"session", live->id}, {"service", header->service}}};
    // A session can ask for refused services at will: those are aggregated per session.
    if (reply.ok) audit(std::move(ev));
    else audit_refusal(std::move(ev), live->address);  // host:port: this session's own key
  }
  if (reply.ok && live->services_noted.insert(header->service).second)
    if (auto r = session_rows_.note_service(live->id, header->service); !r)
      spdlog::warn("sessions table: {}", r.error().what());
  const nlohmann::json reply_json = to_json(reply);  // not a temporary: GCC 12 coroutine bug
  if (!co_await write_stream_message(*stream, reply_json) || !reply.ok) {
    (void)co_await stream->close_write();
    co_return;
  }
  ServiceContext context{live->id, live->consumer, live->grant, {}, live->address, {}};
  context.record_command = [this, alive = std::weak_ptr<char>(audit_alive_),
                            id = live->id](const RunningCommand& c) -> std::shared_ptr<CommandRecord> {
    if (alive.expired()) return nullptr;  // a command started as the provider goes
    return std::make_shared<StoredCommand>(session_rows_, alive,
                                           CommandRow{0, id, c.command, std::chrono::system_clock::now(), c.pid,
                                                      c.cgroup, ::getpid()});
  };
  context.audit = [this, live, batch = entry->batch_audit](const std::string& kind, const std::string& decision,
                                                          const std::string& reason, const nlohmann::json& detail) {
    AuditEvent ev{std::chrono::system_clock::now(), kind, live->grant.id, live->consumer.str(), live->address,
                  decision, reason, detail};
    if (batch) audit_batched(std::move(ev));
    else audit(std::move(ev));
  };
  co_await entry->handler(stream, header->args, context);
}

}  // namespace runsnack
