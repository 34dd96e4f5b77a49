// runsnack_hostile_peer: the adversary of tests/e2e/test_hostile.py. It speaks
// RunSnack's real wire protocol -- TLS 1.3 with its own self-signed Ed25519
// certificate, the grant proof over the TLS exporter (session/auth.hpp), then
// raw yamux frames (net/yamux_frame.hpp) -- and misbehaves as docs/SECURITY.md
// ("Protocol bounds and rendezvous") lists. Each command prints one JSON line
// saying what it did and what the other side answered.
//
// As a consumer, against a provider's LINK:
//   ping-flood LINK SECONDS                 yamux pings as fast as TCP takes them; never reads
//   announce LINK STREAMS BYTES SEND HOLD SERVICE ARGS_JSON
//                                           STREAMS streams, each a valid header for SERVICE, then
//                                           an fs control frame announcing BYTES of which SEND
//                                           arrive; held HOLD seconds (keepalives answered)
//   hold LINK SESSIONS SECONDS SOURCE       SESSIONS sessions from address SOURCE, one after the
//                                           other, each held SECONDS (pings answered); prints
//                                           {"ready":N} when all are tried, then how many held
//   refused LINK hold|flood SECONDS         proves a wrong secret, then never closes: hold sends a
//                                           byte each 100 ms, flood as fast as TCP takes them;
//                                           prints how long until the provider's reset, and the
//                                           bytes it took after refusing
// As a provider (prints {"event":"ready","link":...}, serves until killed):
//   provider MODE   escape       info with terminal escapes in every string; refusals likewise
//                   ping-flood   after the grant proof, pings without reading
//                   announce     every stream: accepted, then a 32 MiB control frame that never comes
//                   push-streams opens 256 streams and pushes 256 KiB into each
//                   silent-forward  lists one forward target (port 1); never answers a stream
//                                to it, and prints {"early":BYTES} for the bytes that came
//                                behind such a stream's header all the same
// Not a product; not installed.
#include "crypto/identity.hpp"
#include "crypto/secret.hpp"
#include "crypto/tls.hpp"
#include "link/link.hpp"
#include "net/tls_stream.hpp"
#include "net/yamux_frame.hpp"
#include "session/handshake.hpp"
#include "session/message.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

namespace {

using namespace runsnack;
namespace asio = boost::asio;
using asio::awaitable;
using asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;
using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

[[noreturn]] void die(const std::string& why) {
  std::cout << json{{"error", why}}.dump() << std::endl;
  std::exit(2);
}

std::string frame_bytes(const yamux::FrameHeader& h, std::string_view payload = {}) {
  auto e = yamux::encode_header(h);
  std::string out(reinterpret_cast<const char*>(e.data()), e.size());
  out += payload;
  return out;
}

std::string ping(std::uint32_t id) { return frame_bytes({yamux::FrameType::ping, yamux::flag::syn, 0, id}); }

std::string data(std::uint32_t stream, std::uint16_t flags, std::string_view payload) {
  return frame_bytes({yamux::FrameType::data, flags, stream, static_cast<std::uint32_t>(payload.size())}, payload);
}

// An fs control-frame header (fs/frame.hpp): type 1, u32 length.
std::string fs_control_header(std::uint32_t length) {
  std::string h(5, '\0');
  h[0] = 1;
  h[1] = static_cast<char>(length >> 24), h[2] = static_cast<char>(length >> 16);
  h[3] = static_cast<char>(length >> 8), h[4] = static_cast<char>(length);
  return h;
}

// Writes with a deadline; false when it did not finish (the peer stopped reading) or failed.
awaitable<bool> write_within(TlsStream& s, const std::string& bytes, std::chrono::milliseconds limit) {
  asio::steady_timer t(co_await asio::this_coro::executor, limit);
  auto r = co_await (asio::async_write(s, asio::buffer(bytes), asio::as_tuple(asio::use_awaitable)) ||
                     t.async_wait(asio::as_tuple(asio::use_awaitable)));
  co_return r.index() == 0 && !std::get<0>(std::get<0>(r));
}

// What a hostile side learns from the frames the other side sends.
struct Seen {
  std::uint64_t frames = 0, ping_acks = 0, resets = 0, ended = 0, bytes = 0;
  bool go_away = false, closed = false;
  std::map<std::uint32_t, std::uint32_t> window;    // our send window per stream (from its updates)
  std::map<std::uint32_t, std::string> inbound;     // data received per stream
  std::map<std::uint32_t, bool> opened;             // streams the other side opened
};

// Reads frames until `until` or the connection ends, answering pings when `answer` is set.
awaitable<void> read_frames(TlsStream& s, Seen& seen, Clock::time_point until, bool answer,
                            std::string* replies = nullptr) {
  std::vector<std::uint8_t> buf;
  std::vector<std::uint8_t> chunk(64 * 1024);
  for (;;) {
    auto left = until - Clock::now();
    if (left <= Clock::duration::zero()) co_return;
    asio::steady_timer t(co_await asio::this_coro::executor, left);
    auto r = co_await (s.async_read_some(asio::buffer(chunk), asio::as_tuple(asio::use_awaitable)) ||
                       t.async_wait(asio::as_tuple(asio::use_awaitable)));
    if (r.index() == 1) co_return;
    auto [ec, n] = std::get<0>(r);
    if (ec) {
      seen.closed = true;
      co_return;
    }
    seen.bytes += n;
    buf.insert(buf.end(), chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(n));
    std::size_t at = 0;
    while (buf.size() - at >= yamux::kHeaderSize) {
      auto h = yamux::decode_header(std::span<const std::uint8_t, yamux::kHeaderSize>(buf.data() + at, yamux::kHeaderSize));
      if (!h) die("the other side sent a bad yamux header");
      std::size_t payload = h->type == yamux::FrameType::data ? h->length : 0;
      if (buf.size() - at < yamux::kHeaderSize + payload) break;
      ++seen.frames;
      if (h->type == yamux::FrameType::ping && h->has(yamux::flag::ack)) ++seen.ping_acks;
      if (h->type == yamux::FrameType::ping && h->has(yamux::flag::syn) && answer && replies)
        *replies += frame_bytes({yamux::FrameType::ping, yamux::flag::ack, 0, h->length});
      if (h->type == yamux::FrameType::go_away) seen.go_away = true;
      if (h->stream_id != 0 && h->has(yamux::flag::rst)) ++seen.resets;
      if (h->stream_id != 0 && (h->has(yamux::flag::rst) || h->has(yamux::flag::fin))) ++seen.ended;
      if (h->stream_id != 0 && h->has(yamux::flag::syn)) seen.opened[h->stream_id] = true;
      if (h->type == yamux::FrameType::window_update) seen.window[h->stream_id] += h->length;
      if (h->type == yamux::FrameType::data)
        seen.inbound[h->stream_id].append(reinterpret_cast<const char*>(buf.data() + at + yamux::kHeaderSize), payload);
      at += yamux::kHeaderSize + payload;
    }
    buf.erase(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(at));
    if (replies && !replies->empty()) {
      std::string out = std::move(*replies);
      replies->clear();
      if (!co_await write_within(s, out, std::chrono::seconds(5))) co_return;
    }
  }
}

// ------------------------------------------------------------------ as a consumer

struct Connected {
  std::unique_ptr<asio::ssl::context> tls;
  std::unique_ptr<TlsStream> stream;
};

awaitable<Connected> connect_and_prove(const Identity& id, const Link& link) {
  auto ex = co_await asio::this_coro::executor;
  if (link.candidates.empty()) die("the link has no direct address");
  auto ctx = make_tls_context(id, TlsRole::client);
  if (!ctx) die(ctx.error().what());
  Connected c;
  c.tls = std::make_unique<asio::ssl::context>(*ctx);
  tcp::resolver resolver(ex);
  const auto& ep = link.candidates.front();
  auto found = co_await resolver.async_resolve(ep.host, std::to_string(ep.port), asio::use_awaitable);
  tcp::socket sock(ex);
  co_await asio::async_connect(sock, found, asio::use_awaitable);
  c.stream = std::make_unique<TlsStream>(std::move(sock), *c.tls);
  co_await c.stream->async_handshake(asio::ssl::stream_base::client, asio::use_awaitable);
  auto session = co_await prove_grant(*c.stream, link);
  if (!session) die("grant proof refused: " + session.error().what());
  co_return c;
}

// One session from `source`, proven; an error value when the provider refuses it.
awaitable<Result<Connected>> open_session_from(const Identity& id, const Link& link, const std::string& source) {
  auto ex = co_await asio::this_coro::executor;
  const auto& ep = link.candidates.front();
  Connected c;
  c.tls = std::make_unique<asio::ssl::context>(*make_tls_context(id, TlsRole::client));
  tcp::socket sock(ex, tcp::endpoint(asio::ip::make_address(source), 0));
  co_await sock.async_connect(tcp::endpoint(asio::ip::make_address(ep.host), ep.port), asio::use_awaitable);
  c.stream = std::make_unique<TlsStream>(std::move(sock), *c.tls);
  co_await c.stream->async_handshake(asio::ssl::stream_base::client, asio::use_awaitable);
  auto session = co_await prove_grant(*c.stream, link);
  if (!session) co_return session.error();
  co_return c;
}

awaitable<void> hold_sessions(const Identity& id, Link link, int sessions, int seconds, std::string source) {
  auto ex = co_await asio::this_coro::executor;
  std::vector<Connected> held;
  json refused = json::array();
  for (int i = 0; i < sessions; ++i) {
    auto c = co_await open_session_from(id, link, source);
    if (c) held.push_back(std::move(*c));
    else refused.push_back(c.error().what());
  }
  std::cout << json{{"ready", held.size()}, {"refused", refused}}.dump() << std::endl;
  int alive = 0;
  auto until = Clock::now() + std::chrono::seconds(seconds);
  for (auto& c : held) {
    asio::co_spawn(ex, [&alive, &c, until]() -> awaitable<void> {
      Seen seen;
      std::string replies;
      co_await read_frames(*c.stream, seen, until, true, &replies);
      alive += !seen.closed;
    }, asio::detached);
  }
  asio::steady_timer t(ex, until + std::chrono::seconds(1));
  co_await t.async_wait(asio::use_awaitable);
  std::cout << json{{"held", alive}, {"refused", refused}}.dump() << std::endl;
}

awaitable<void> ping_flood_provider(const Identity& id, Link link, int seconds) {
  auto c = co_await connect_and_prove(id, link);
  // 4096 pings (48 KiB) per write; each write must finish within 2 s or the
  // provider has stopped reading us (backpressure), which ends the flood.
  std::string batch;
  std::uint32_t next = 1;
  std::uint64_t sent = 0;
  bool stalled = false;
  auto until = Clock::now() + std::chrono::seconds(seconds);
  while (Clock::now() < until) {
    batch.clear();
    for (int i = 0; i < 4096; ++i) batch += ping(next++);
    if (!co_await write_within(*c.stream, batch, std::chrono::seconds(2))) {
      stalled = true;
      break;
    }
    sent += 4096;
  }
  Seen seen;
  co_await read_frames(*c.stream, seen, Clock::now() + std::chrono::seconds(15), false);
  std::cout << json{{"pings_sent", sent}, {"stalled", stalled}, {"ping_acks", seen.ping_acks},
                    {"go_away", seen.go_away}, {"closed", seen.closed}}.dump()
            << std::endl;
}

awaitable<void> announce_to_provider(const Identity& id, Link link, int streams, std::uint32_t announce,
                                     std::uint64_t send, int hold, std::string service, json args) {
  auto c = co_await connect_and_prove(id, link);
  const std::string header = encode_message({{"service", service}, {"args", args}});
  std::string out;
  for (int i = 0; i < streams; ++i) {
    std::uint32_t sid = 2 * static_cast<std::uint32_t>(i) + 1;
    out += data(sid, yamux::flag::syn, header + fs_control_header(announce));
  }
  if (!co_await write_within(*c.stream, out, std::chrono::seconds(10))) die("the provider stopped reading");
  // Then SEND bytes of each announced frame, as far as each stream's window allows.
  Seen seen;
  std::string replies;
  std::map<std::uint32_t, std::uint64_t> sent;
  const std::uint64_t first_window = 256 * 1024 - header.size() - 5;
  const std::string filler(16 * 1024, ' ');
  auto until = Clock::now() + std::chrono::seconds(hold);
  bool progress = true;
  while (Clock::now() < until) {
    out.clear();
    for (int i = 0; i < streams && progress; ++i) {
      std::uint32_t sid = 2 * static_cast<std::uint32_t>(i) + 1;
      std::uint64_t allowed = first_window + seen.window[sid];
      while (sent[sid] < send && sent[sid] < allowed && out.size() < 4 * 1024 * 1024) {
        std::uint64_t n = std::min<std::uint64_t>({filler.size(), send - sent[sid], allowed - sent[sid]});
        out += data(sid, 0, std::string_view(filler).substr(0, n));
        sent[sid] += n;
      }
    }
    if (!out.empty() && !co_await write_within(*c.stream, out, std::chrono::seconds(10))) break;
    co_await read_frames(*c.stream, seen, Clock::now() + std::chrono::milliseconds(200), true, &replies);
    if (seen.closed) break;
  }
  std::uint64_t total = 0;
  for (auto& [sid, n] : sent) total += n;
  std::cout << json{{"streams", streams}, {"announced", announce}, {"sent", total}, {"resets", seen.resets},
                    {"ended", seen.ended},
                    {"go_away", seen.go_away}, {"closed", seen.closed}}.dump()
            << std::endl;
}

// After the provider refused our (wrong) proof: never close, and either hold the connection (a byte
// each 100 ms, so its reset shows) or push bytes as fast as it takes them. What the provider lets
// a refused peer make it hold is its linger after the refusal (provider.cpp, close_after_refusal).
awaitable<void> refused_then(const Identity& id, Link link, std::string mode, int seconds) {
  auto ex = co_await asio::this_coro::executor;
  link.secret = new_secret();
  const auto& ep = link.candidates.front();
  auto tls = make_tls_context(id, TlsRole::client);
  if (!tls) die(tls.error().what());
  asio::ssl::context ctx(*tls);
  tcp::socket sock(ex);
  co_await sock.async_connect(tcp::endpoint(asio::ip::make_address(ep.host), ep.port), asio::use_awaitable);
  TlsStream stream(std::move(sock), ctx);
  co_await stream.async_handshake(asio::ssl::stream_base::client, asio::use_awaitable);
  auto session = co_await prove_grant(stream, link);
  if (session) die("the provider took a wrong secret");
  const auto refused_at = Clock::now();
  auto& raw = stream.next_layer();
  const std::string chunk(mode == "flood" ? 64 * 1024 : 1, 'x');
  std::uint64_t sent = 0;
  bool closed = false;
  const auto until = refused_at + std::chrono::seconds(seconds);
  while (!closed && Clock::now() < until) {
    asio::steady_timer t(ex, std::chrono::milliseconds(100));
    auto r = co_await (raw.async_write_some(asio::buffer(chunk), asio::as_tuple(asio::use_awaitable)) ||
                       t.async_wait(asio::as_tuple(asio::use_awaitable)));
    if (r.index() == 0) {
      auto [ec, n] = std::get<0>(r);
      closed = static_cast<bool>(ec);
      sent += n;
      if (mode == "hold" && !closed) co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    }
  }
  auto after = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - refused_at).count();
  std::cout << json{{"refused", session.error().what()}, {"closed", closed}, {"closed_after_ms", closed ? after : -1},
                    {"sent", sent}}.dump()
            << std::endl;
}

// ------------------------------------------------------------------ as a provider

// OSC retitle, clear screen, colour, carriage return, backspace, and CSI in its 8-bit (C1) form.
const char* kEvil = "\x1b]0;pwned\x07\x1b[2J\x1b[31mEVIL\x1b[0m\r\x08\xc2\x9b" "6n";

json evil_info(const std::string& grant_id) {
  json gpu = {{"index", 0},       {"name", std::string("GPU ") + kEvil}, {"uuid", std::string("GPU-") + kEvil},
              {"memory_total", 1 << 30}, {"memory_used", 0}, {"utilization_pct", 0}, {"temperature_c", 40}};
  return {{"host", {{"hostname", std::string("host") + kEvil}, {"os", std::string("os") + kEvil},
                    {"kernel", kEvil}, {"cpu_model", kEvil}, {"cpu_count", 1}, {"ram_total", 1 << 30},
                    {"ram_available", 1 << 29}}},
          {"gpu_report", {{"nvml_loaded", true}, {"driver_version", kEvil}, {"cuda_version", kEvil},
                          {"gpus", json::array({gpu})}, {"note", kEvil}}},
          {"grant", {{"id", grant_id}, {"label", std::string("label") + kEvil}, {"services", {std::string("info") + kEvil}},
                     {"expires", kEvil}, {"uses", 1}, {"max_uses", nullptr}, {"max_sessions", nullptr}}}};
}

// Serves streams the consumer opens: a header, then what MODE says.
awaitable<void> serve_streams(TlsStream& s, const std::string& mode, const std::string& grant_id) {
  Seen seen;
  std::string replies;
  std::map<std::uint32_t, bool> answered;
  std::map<std::uint32_t, std::size_t> unanswered;  // silent-forward: stream -> its header's size
  const std::string pattern(64 * 1024, 'p');
  for (;;) {
    co_await read_frames(s, seen, Clock::now() + std::chrono::milliseconds(50), true, &replies);
    if (seen.closed) co_return;
    for (auto it = unanswered.begin(); it != unanswered.end();) {
      const std::string& in = seen.inbound[it->first];
      if (in.size() <= it->second) {
        ++it;
        continue;
      }
      std::cout << json{{"early", in.substr(it->second)}}.dump() << std::endl;
      it = unanswered.erase(it);
    }
    std::string out;
    for (auto& [sid, in] : seen.inbound) {
      if (answered[sid] || in.size() < 4) continue;
      std::uint32_t n = (std::uint32_t(std::uint8_t(in[0])) << 24) | (std::uint32_t(std::uint8_t(in[1])) << 16) |
                        (std::uint32_t(std::uint8_t(in[2])) << 8) | std::uint8_t(in[3]);
      if (in.size() < 4 + n) continue;
      answered[sid] = true;
      auto header = json::parse(in.substr(4, n), nullptr, false);
      std::string service = header.is_object() && header["service"].is_string() ? header["service"].get<std::string>() : "";
      std::string body;
      std::uint16_t end = yamux::flag::fin;
      const bool listing = header.is_object() && header["args"].is_object() && header["args"].value("list", false);
      if (mode == "silent-forward" && service == "forward" && !listing) {
        unanswered[sid] = 4 + n;
        out += frame_bytes({yamux::FrameType::window_update, yamux::flag::ack, sid, 0});
        continue;
      }
      if (mode == "silent-forward" && service == "forward") {
        json target = {{"name", "1"}, {"host", "127.0.0.1"}, {"port", 1}, {"host_header", false}};
        body = encode_message({{"ok", true}}) +
               encode_message({{"ok", true}, {"targets", json::array({target})}, {"max_connections", nullptr},
                               {"bandwidth_bytes_per_s", nullptr}});
      } else if (mode == "announce") {
        body = encode_message({{"ok", true}}) + fs_control_header(32u << 20);
        end = 0;
      } else if (service == "info") {
        body = encode_message({{"ok", true}}) + encode_message(evil_info(grant_id));
      } else if (service == "probe") {
        body = encode_message({{"ok", true}}) + pattern;
      } else {
        body = encode_message({{"ok", false}, {"code", "refused"}, {"reason", std::string("no ") + kEvil}});
      }
      out += frame_bytes({yamux::FrameType::window_update, yamux::flag::ack, sid, 0});
      out += data(sid, end, body);
    }
    if (!out.empty() && !co_await write_within(s, out, std::chrono::seconds(5))) co_return;
  }
}

awaitable<void> push_streams(TlsStream& s) {
  // Server streams are even. Each: SYN, then a full initial window of data.
  const std::string block(256 * 1024, 'z');
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t sid = 2 * (i + 1);
    std::string out = frame_bytes({yamux::FrameType::window_update, yamux::flag::syn, sid, 0}) + data(sid, 0, block);
    if (!co_await write_within(s, out, std::chrono::seconds(5))) break;
  }
  Seen seen;
  std::string replies;
  co_await read_frames(s, seen, Clock::now() + std::chrono::seconds(60), true, &replies);
}

awaitable<void> serve_consumer(asio::ssl::context& tls, tcp::socket sock, std::string mode, std::string grant_id) {
  auto s = std::make_unique<TlsStream>(std::move(sock), tls);
  auto [ec] = co_await s->async_handshake(asio::ssl::stream_base::server, asio::as_tuple(asio::use_awaitable));
  if (ec) co_return;
  auto hello = co_await read_auth_hello(*s);
  if (!hello) co_return;
  // Any proof will do: this provider wants the consumer in. (Named: GCC 12
  // mishandles class temporaries in a co_await expression.)
  const AuthReply welcome{true, errc::ok, "", "hostile"};
  if (!co_await send_auth_reply(*s, welcome)) co_return;
  if (mode == "ping-flood") {
    std::string batch;
    std::uint32_t next = 1;
    auto until = Clock::now() + std::chrono::seconds(60);
    while (Clock::now() < until) {
      batch.clear();
      for (int i = 0; i < 4096; ++i) batch += ping(next++);
      if (!co_await write_within(*s, batch, std::chrono::seconds(2))) break;
    }
    co_return;
  }
  if (mode == "push-streams") co_return co_await push_streams(*s);
  co_await serve_streams(*s, mode, grant_id);
}

awaitable<void> hostile_provider(const Identity& id, std::string mode) {
  auto ex = co_await asio::this_coro::executor;
  auto ctx = make_tls_context(id, TlsRole::server);
  if (!ctx) die(ctx.error().what());
  asio::ssl::context tls(*ctx);
  tcp::acceptor acceptor(ex, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  Link link;
  link.candidates.push_back(Endpoint{"127.0.0.1", acceptor.local_endpoint().port()});
  link.provider = id.peer_id();
  link.grant_id = new_grant_id();
  link.secret = new_secret();
  std::cout << json{{"event", "ready"}, {"link", format_link(link)}, {"peer", id.peer_id().str()}}.dump() << std::endl;
  for (;;) {
    auto sock = co_await acceptor.async_accept(asio::use_awaitable);
    asio::co_spawn(ex, serve_consumer(tls, std::move(sock), mode, link.grant_id), asio::detached);
  }
}

int usage() {
  std::cerr << "usage: runsnack_hostile_peer ping-flood LINK SECONDS\n"
               "       runsnack_hostile_peer announce LINK STREAMS BYTES SEND HOLD SERVICE ARGS_JSON\n"
               "       runsnack_hostile_peer hold LINK SESSIONS SECONDS SOURCE\n"
               "       runsnack_hostile_peer refused LINK hold|flood SECONDS\n"
               "       runsnack_hostile_peer provider escape|ping-flood|announce|push-streams|silent-forward\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> a(argv + 1, argv + argc);
  if (a.empty()) return usage();
  auto id = Identity::generate();
  if (!id) die(id.error().what());
  asio::io_context io(1);
  auto link_of = [&](const std::string& text) {
    auto l = parse_link(text);
    if (!l) die("bad link: " + l.error().what());
    return *l;
  };
  auto on_done = [](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      die(ex.what());
    }
  };
  if (a[0] == "ping-flood" && a.size() == 3) {
    asio::co_spawn(io, ping_flood_provider(*id, link_of(a[1]), std::stoi(a[2])), on_done);
  } else if (a[0] == "announce" && a.size() == 8) {
    auto args = json::parse(a[7], nullptr, false);
    if (!args.is_object()) return usage();
    asio::co_spawn(io,
                   announce_to_provider(*id, link_of(a[1]), std::stoi(a[2]), static_cast<std::uint32_t>(std::stoul(a[3])),
                                        std::stoull(a[4]), std::stoi(a[5]), a[6], args),
                   on_done);
  } else if (a[0] == "hold" && a.size() == 5) {
    asio::co_spawn(io, hold_sessions(*id, link_of(a[1]), std::stoi(a[2]), std::stoi(a[3]), a[4]), on_done);
  } else if (a[0] == "refused" && a.size() == 4 && (a[2] == "hold" || a[2] == "flood")) {
    asio::co_spawn(io, refused_then(*id, link_of(a[1]), a[2], std::stoi(a[3])), on_done);
  } else if (a[0] == "provider" && a.size() == 2) {
    asio::co_spawn(io, hostile_provider(*id, a[1]), on_done);
  } else {
    return usage();
  }
  io.run();
  return 0;
}
