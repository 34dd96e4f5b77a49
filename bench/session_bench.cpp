// session_bench: throughput, round-trip latency, session setup time and
// provider memory, on loopback (127.0.0.1 only). bench/run.sh drives it and
// compares the figures with socat and ssh -L measured in the same run.
//
//   session_bench server                    plain TCP echo/sink server; prints "PORT n", serves until killed
//   session_bench tcp PORT LABEL            measures through a TCP port (the server itself, or a relay to it)
//   session_bench runsnack HOME             forks a real Provider (RUNSNACK_HOME=HOME), measures a real session
//
// Options (environment): BENCH_BYTES (per throughput run, default 1 GiB),
// BENCH_RUNS (throughput runs, median reported, default 3), BENCH_PINGS
// (default 2000), BENCH_CONNECTS (default 50), BENCH_SESSIONS (default 100).
//
// App protocol on a byte stream (identical on every path):
//   sink: client sends 'S', u64 n (little endian), n bytes; server answers 1 byte.
//   echo: client sends 'E'; then the server echoes every byte until EOF.
// A RunSnack stream names the service ("sink"/"echo") in its header instead
// of the first byte; the rest is the same.
#include "consumer/consumer.hpp"
#include "core/error.hpp"
#include "crypto/identity.hpp"
#include "crypto/secret.hpp"
#include "link/link.hpp"
#include "provider/provider.hpp"
#include "provider/service_router.hpp"
#include "store/database.hpp"
#include "store/grant_store.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <arpa/inet.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

namespace asio = boost::asio;
using namespace runsnack;
using Clock = std::chrono::steady_clock;

std::uint64_t env_u64(const char* name, std::uint64_t def) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : def;
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  std::size_t i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "session_bench: %s\n", what.c_str());
  std::exit(1);
}

// ---------------------------------------------------------------- plain TCP

void send_all(int fd, const void* p, std::size_t n) {
  auto* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::send(fd, c, n, MSG_NOSIGNAL);
    if (w <= 0) throw std::runtime_error("send failed");
    c += w;
    n -= static_cast<std::size_t>(w);
  }
}

void recv_all(int fd, void* p, std::size_t n) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = ::recv(fd, c, n, 0);
    if (r <= 0) throw std::runtime_error("recv failed or early EOF");
    c += r;
    n -= static_cast<std::size_t>(r);
  }
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void serve_tcp_connection(int fd) {
  try {
    set_nodelay(fd);
    char mode = 0;
    recv_all(fd, &mode, 1);
    std::vector<char> buf(1 << 20);
    if (mode == 'S') {
      std::uint64_t n = 0;
      recv_all(fd, &n, sizeof n);
      while (n > 0) {
        ssize_t r = ::recv(fd, buf.data(), std::min<std::uint64_t>(n, buf.size()), 0);
        if (r <= 0) throw std::runtime_error("sink: early EOF");
        n -= static_cast<std::uint64_t>(r);
      }
      send_all(fd, "k", 1);
    } else if (mode == 'E') {
      for (;;) {
        ssize_t r = ::recv(fd, buf.data(), buf.size(), 0);
        if (r <= 0) break;
        send_all(fd, buf.data(), static_cast<std::size_t>(r));
      }
    }
  } catch (const std::exception&) {
  }
  ::close(fd);
}

int cmd_server() {
  int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  if (::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(lfd, 128) != 0) die("server: bind/listen");
  socklen_t len = sizeof a;
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
  std::printf("PORT %u\n", ntohs(a.sin_port));
  std::fflush(stdout);
  for (;;) {
    int fd = ::accept(lfd, nullptr, nullptr);
    if (fd < 0) continue;
    std::thread(serve_tcp_connection, fd).detach();
  }
}

int tcp_connect(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("connect to 127.0.0.1:" + std::to_string(port));
  set_nodelay(fd);
  return fd;
}

struct Figures {
  double gbps = 0;               // median of the throughput runs
  double rtt_median_us = 0, rtt_p99_us = 0;
};

void print_figures(const std::string& label, const Figures& f) {
  std::printf("RESULT %s throughput_gbps %.2f\n", label.c_str(), f.gbps);
  std::printf("RESULT %s rtt_median_us %.1f\n", label.c_str(), f.rtt_median_us);
  std::printf("RESULT %s rtt_p99_us %.1f\n", label.c_str(), f.rtt_p99_us);
  std::fflush(stdout);
}

int cmd_tcp(std::uint16_t port, const std::string& label) {
  const std::uint64_t bytes = env_u64("BENCH_BYTES", 1ull << 30);
  const std::uint64_t runs = env_u64("BENCH_RUNS", 3);
  const std::uint64_t pings = env_u64("BENCH_PINGS", 2000);
  std::vector<char> chunk(1 << 20, 'x');
  std::vector<double> rates;
  for (std::uint64_t r = 0; r < runs; ++r) {
    int fd = tcp_connect(port);
    auto start = Clock::now();
    send_all(fd, "S", 1);
    send_all(fd, &bytes, sizeof bytes);
    for (std::uint64_t left = bytes; left > 0;) {
      std::size_t n = std::min<std::uint64_t>(left, chunk.size());
      send_all(fd, chunk.data(), n);
      left -= n;
    }
    char ack = 0;
    recv_all(fd, &ack, 1);
    rates.push_back(static_cast<double>(bytes) * 8 / seconds_since(start) / 1e9);
    ::close(fd);
  }
  int fd = tcp_connect(port);
  send_all(fd, "E", 1);
  char msg[64], back[64];
  std::memset(msg, 'p', sizeof msg);
  std::vector<double> rtts;
  for (std::uint64_t i = 0; i < pings + 100; ++i) {
    auto t = Clock::now();
    send_all(fd, msg, sizeof msg);
    recv_all(fd, back, sizeof back);
    if (i >= 100) rtts.push_back(seconds_since(t) * 1e6);
  }
  ::close(fd);
  print_figures(label, {percentile(rates, 0.5), percentile(rtts, 0.5), percentile(rtts, 0.99)});
  return 0;
}

// ---------------------------------------------------------------- RunSnack

asio::awaitable<void> serve_sink(std::shared_ptr<MuxStream> stream) {
  std::uint64_t n = 0;
  if (!co_await stream->read_exact(asio::buffer(&n, sizeof n))) co_return;
  std::vector<std::uint8_t> buf(1 << 20);
  while (n > 0) {
    auto r = co_await stream->read_some(asio::buffer(buf.data(), std::min<std::uint64_t>(n, buf.size())));
    if (!r || *r == 0) co_return;
    n -= *r;
  }
  const char ack = 'k';
  if (co_await stream->write(asio::buffer(&ack, 1))) (void)co_await stream->close_write();
}

asio::awaitable<void> serve_echo(std::shared_ptr<MuxStream> stream) {
  std::vector<std::uint8_t> buf(1 << 20);
  for (;;) {
    auto r = co_await stream->read_some(asio::buffer(buf));
    if (!r || *r == 0) break;
    if (!co_await stream->write(asio::buffer(buf.data(), *r))) co_return;
  }
  (void)co_await stream->close_write();
}

// The provider process: a real Provider with the default services plus the
// bench's, serving the grant written to HOME's database. Writes the link to
// `link_fd`, then serves until SIGTERM.
[[noreturn]] void provider_child(const std::string& home, int link_fd) {
  spdlog::set_level(spdlog::level::warn);
  auto identity = Identity::load_or_create(home);
  if (!identity) die("provider identity: " + std::string(identity.error().what()));
  auto db = Database::open(std::filesystem::path(home) / "runsnack.db");
  if (!db) die("provider database: " + std::string(db.error().what()));

  Grant grant;
  grant.id = new_grant_id();
  std::string secret = new_secret();
  grant.key = derive_grant_key(secret);
  grant.created = std::chrono::system_clock::now();
  grant.services = {kServiceInfo, "echo", "sink"};
  GrantStore grants(*db);
  if (auto r = grants.create(grant); !r) die("grant: " + std::string(r.error().what()));

  ServiceRouter router = default_services();
  router.add("sink", {[](std::shared_ptr<MuxStream> s, const nlohmann::json&, const ServiceContext&) {
                        return serve_sink(std::move(s));
                      },
                      "sink", false});
  router.add("echo", {[](std::shared_ptr<MuxStream> s, const nlohmann::json&, const ServiceContext&) {
                        return serve_echo(std::move(s));
                      },
                      "echo", false});

  asio::io_context io(1);
  ProviderOptions options;
  options.listen_address = "127.0.0.1";
  options.ports = PortRange{0, 0};
  // It holds BENCH_SESSIONS idle sessions from one address to measure what a session costs;
  // the provider's per-address session limit (32) is not what it measures.
  options.sessions = {1 << 20, 1 << 20};
  Provider provider(io.get_executor(), *identity, *db, options, std::move(router), [](const nlohmann::json& ev) {
    if (ev.value("event", "") == "refused") std::fprintf(stderr, "provider: %s\n", ev.dump().c_str());
  });
  if (auto r = provider.listen(); !r) die("provider listen: " + std::string(r.error().what()));

  Link link;
  link.candidates = {Endpoint{"127.0.0.1", provider.local_endpoint().port()}};
  link.provider = identity->peer_id();
  link.grant_id = grant.id;
  link.secret = secret;
  std::string text = format_link(link) + "\n";
  if (::write(link_fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) die("link pipe");
  ::close(link_fd);
  asio::co_spawn(io, provider.run(), asio::detached);
  io.run();
  std::_Exit(0);
}

std::uint64_t rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10);
  return 0;
}

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::use_awaitable);
}

template <typename T>
T must(Result<T> r, const char* what) {
  if (!r) die(std::string(what) + ": " + r.error().what());
  return std::move(*r);
}

// Named variables instead of temporaries around co_await: GCC 12 miscompiles
// temporaries that live across a suspension point.
asio::awaitable<std::unique_ptr<Session>> connect_or_die(Consumer& consumer, const Link& link) {
  ConnectOptions options;
  auto r = co_await consumer.connect(link, options);
  if (!r) die(std::string("connect: ") + r.error().what());
  co_return std::move(*r);
}

asio::awaitable<std::shared_ptr<MuxStream>> open_or_die(Session& session, const char* service) {
  StreamHeader header;
  header.service = service;
  auto r = co_await session.open(header);
  if (!r) die(std::string("open ") + service + ": " + r.error().what());
  co_return std::move(*r);
}

asio::awaitable<void> consumer_main(Consumer& consumer, Link link, pid_t provider) {
  const std::uint64_t bytes = env_u64("BENCH_BYTES", 1ull << 30);
  const std::uint64_t runs = env_u64("BENCH_RUNS", 3);
  const std::uint64_t pings = env_u64("BENCH_PINGS", 2000);
  const std::uint64_t connects = env_u64("BENCH_CONNECTS", 50);
  const std::uint64_t idle_sessions = env_u64("BENCH_SESSIONS", 100);

  co_await sleep_for(std::chrono::milliseconds(300));
  const std::uint64_t idle_rss = rss_kib(provider);

  // Session setup: Consumer::connect (TCP + TLS + grant proof), wall clock.
  std::vector<double> setup_ms;
  for (std::uint64_t i = 0; i < connects + 3; ++i) {
    auto t = Clock::now();
    auto s = co_await connect_or_die(consumer, link);
    if (i >= 3) setup_ms.push_back(seconds_since(t) * 1e3);
  }
  co_await sleep_for(std::chrono::milliseconds(300));

  // Provider memory with many idle sessions.
  const std::uint64_t before_rss = rss_kib(provider);
  {
    std::vector<std::unique_ptr<Session>> held;
    for (std::uint64_t i = 0; i < idle_sessions; ++i) held.push_back(co_await connect_or_die(consumer, link));
    co_await sleep_for(std::chrono::milliseconds(500));
    const std::uint64_t held_rss = rss_kib(provider);
    std::printf("RESULT runsnack provider_rss_idle_mib %.1f\n", static_cast<double>(idle_rss) / 1024);
    std::printf("RESULT runsnack provider_rss_before_sessions_mib %.1f\n", static_cast<double>(before_rss) / 1024);
    std::printf("RESULT runsnack provider_rss_sessions_mib %.1f\n", static_cast<double>(held_rss) / 1024);
    std::printf("RESULT runsnack provider_idle_sessions %llu\n", static_cast<unsigned long long>(idle_sessions));
    std::printf("RESULT runsnack provider_kib_per_session %.1f\n",
                (static_cast<double>(held_rss) - static_cast<double>(before_rss)) /
                    static_cast<double>(std::max<std::uint64_t>(idle_sessions, 1)));
  }
  std::printf("RESULT runsnack setup_median_ms %.2f\n", percentile(setup_ms, 0.5));
  std::printf("RESULT runsnack setup_p90_ms %.2f\n", percentile(setup_ms, 0.9));
  std::fflush(stdout);
  co_await sleep_for(std::chrono::milliseconds(300));

  // One session, one stream per run, as the TCP paths use one connection per run.
  auto session = co_await connect_or_die(consumer, link);
  std::vector<std::uint8_t> chunk(1 << 20, 'x');
  std::vector<double> rates;
  for (std::uint64_t r = 0; r < runs; ++r) {
    auto start = Clock::now();
    auto stream = co_await open_or_die(*session, "sink");
    if (!co_await stream->write(asio::buffer(&bytes, sizeof bytes))) die("sink write");
    for (std::uint64_t left = bytes; left > 0;) {
      std::size_t n = std::min<std::uint64_t>(left, chunk.size());
      if (!co_await stream->write(asio::buffer(chunk.data(), n))) die("sink write");
      left -= n;
    }
    char ack = 0;
    if (!co_await stream->read_exact(asio::buffer(&ack, 1))) die("sink ack");
    rates.push_back(static_cast<double>(bytes) * 8 / seconds_since(start) / 1e9);
    (void)co_await stream->close_write();
  }
  auto echo = co_await open_or_die(*session, "echo");
  char msg[64], back[64];
  std::memset(msg, 'p', sizeof msg);
  std::vector<double> rtts;
  for (std::uint64_t i = 0; i < pings + 100; ++i) {
    auto t = Clock::now();
    if (!co_await echo->write(asio::buffer(msg))) die("echo write");
    if (!co_await echo->read_exact(asio::buffer(back))) die("echo read");
    if (i >= 100) rtts.push_back(seconds_since(t) * 1e6);
  }
  (void)co_await echo->close_write();
  print_figures("runsnack", {percentile(rates, 0.5), percentile(rtts, 0.5), percentile(rtts, 0.99)});
}

int cmd_runsnack(const std::string& home) {
  int fds[2];
  if (::pipe(fds) != 0) die("pipe");
  // Fork first, before this process has allocated or started anything, so
  // the provider's RSS is its own.
  pid_t child = ::fork();
  if (child < 0) die("fork");
  if (child == 0) {
    ::close(fds[0]);
    ::setenv("RUNSNACK_HOME", home.c_str(), 1);
    provider_child(home, fds[1]);
  }
  ::close(fds[1]);
  std::printf("PROVIDER_PID %d\n", static_cast<int>(child));
  std::fflush(stdout);
  std::string text;
  char c;
  while (::read(fds[0], &c, 1) == 1 && c != '\n') text.push_back(c);
  ::close(fds[0]);
  int rc = 0;
  if (text.empty()) {
    rc = 1;
    std::fprintf(stderr, "session_bench: the provider did not start\n");
  } else {
    spdlog::set_level(spdlog::level::warn);
    Link link = must(parse_link(text), "link");
    Identity me = must(Identity::generate(), "consumer identity");
    auto consumer = must(Consumer::create(me), "consumer");
    asio::io_context io(1);
    asio::co_spawn(io, consumer_main(*consumer, link, child), [&](std::exception_ptr e) {
      if (!e) return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        std::fprintf(stderr, "session_bench: %s\n", ex.what());
        rc = 1;
      }
    });
    io.run();
  }
  ::kill(child, SIGTERM);
  int status = 0;
  ::waitpid(child, &status, 0);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "server") return cmd_server();
  if (cmd == "tcp" && argc == 4) return cmd_tcp(static_cast<std::uint16_t>(std::atoi(argv[2])), argv[3]);
  if (cmd == "runsnack" && argc == 3) return cmd_runsnack(argv[2]);
  std::fprintf(stderr,
               "usage: session_bench server | tcp PORT LABEL | runsnack HOME\n"
               "(bench/run.sh runs the whole comparison)\n");
  return 2;
}
