// wanbridge: a user-space WAN between two TAP devices, each in its own network
// namespace (tests/netlab/netlab.py makes them). Every Ethernet frame read
// from one TAP is written to the other after what PathModel decides: delay,
// jitter, loss, reordering, a rate-limited bottleneck, blackholes.
//
//   wanbridge --ns-a /run/netns/A --tap-a wan0 --ns-b /run/netns/B --tap-b wan0
//             [--delay-ms D] [--jitter-ms J] [--loss P] [--loss-burst N] [--reorder P]
//             [--reorder-ms R] [--rate-mbit M] [--queue-ms Q] [--burst-ms B] [--seed S] [--realtime]
//             [--spin-us U] [--control /path/to/socket]
//
// The same parameters hold for both directions. One thread per direction reads
// frames in batches, keeps them in a heap ordered by release time and writes
// them out when due (ppoll with a nanosecond timeout, then a spin for the last
// U microseconds, 150 by default; --realtime runs the two threads SCHED_FIFO so
// a busy machine does not stretch the delays).
// Prints {"event":"ready"} once both TAPs are open. The control socket takes
// one command per connection and answers one JSON line:
//   set KEY=VALUE...   (keys as the options, without --): new parameters
//   outage MS          blackhole both directions for MS milliseconds from now
//   stats              frames and bytes per direction and what became of them
// SIGINT/SIGTERM end it.
#include "path_model.hpp"

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <queue>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using netlab::Nanos;
using netlab::PathParams;

Nanos now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<Nanos>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "wanbridge: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

// Opens the existing TAP `name` inside the network namespace at `ns_path`.
int open_tap(const std::string& ns_path, const std::string& name) {
  int ns = ::open(ns_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (ns < 0) die("open " + ns_path);
  if (::setns(ns, CLONE_NEWNET) != 0) die("setns " + ns_path);
  ::close(ns);
  int fd = ::open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) die("open /dev/net/tun");
  ifreq ifr{};
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
  std::snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name.c_str());
  if (::ioctl(fd, TUNSETIFF, &ifr) != 0) die("TUNSETIFF " + name + " in " + ns_path);
  return fd;
}

// Parameters shared with the direction threads: written under the mutex by
// the control loop, picked up by each thread when `version` moves.
struct Shared {
  std::mutex mu;
  PathParams params;
  std::atomic<std::uint64_t> version{0};
  std::atomic<Nanos> outage_until{0};
  std::atomic<bool> stop{false};
};

struct Counters {
  std::atomic<std::uint64_t> frames{0}, bytes{0}, delivered{0}, lost{0}, queue_full{0}, outage{0}, reordered{0},
      overflow{0}, write_failed{0};
  std::atomic<int> last_errno{0};
};

constexpr std::size_t kFrameMax = 2048;    // MTU 1500 + Ethernet header, with room
constexpr std::size_t kMaxHeld = 1 << 16;  // frames held per direction (128 MiB at most)
constexpr int kBatch = 256;                // frames read per wake-up before releasing again

struct Held {
  Nanos release;
  std::uint64_t seq;  // keeps equal release times in arrival order
  std::uint32_t slot;
  std::uint32_t len;
  bool operator>(const Held& o) const { return release != o.release ? release > o.release : seq > o.seq; }
};

class Direction {
 public:
  Direction(int in, int out, Shared& shared, Counters& counters, std::uint64_t seed, int wake, Nanos spin)
      : in_(in), out_(out), shared_(shared), counters_(counters), model_(PathParams{}, seed), wake_(wake), spin_(spin) {}

  void run() {
    while (!shared_.stop.load(std::memory_order_relaxed)) {
      refresh();
      release_due(now_ns());
      const bool more = read_batch();
      if (more) continue;  // frames still waiting in the TAP: read before sleeping
      timespec timeout{0, 100'000'000};  // wake now and then to notice stop
      if (!heap_.empty()) {
        const Nanos wait = std::max<Nanos>(0, heap_.top().release - now_ns());
        // A timed wake-up comes tens of microseconds late (more on a busy or
        // virtual machine): the last stretch before a release is spun instead.
        if (wait < spin_) continue;
        if (wait < 100'000'000) {
          const Nanos sleep = wait - spin_;
          timeout = {static_cast<time_t>(sleep / 1'000'000'000), static_cast<long>(sleep % 1'000'000'000)};
        }
      }
      pollfd fds[2] = {{in_, POLLIN, 0}, {wake_, POLLIN, 0}};
      ::ppoll(fds, 2, &timeout, nullptr);
    }
  }

 private:
  void refresh() {
    const auto v = shared_.version.load(std::memory_order_acquire);
    if (v != seen_version_) {
      std::lock_guard lock(shared_.mu);
      model_.set_params(shared_.params);
      seen_version_ = v;
    }
    model_.blackhole_until(shared_.outage_until.load(std::memory_order_relaxed));
  }

  std::uint32_t take_slot() {
    if (!free_.empty()) {
      auto s = free_.back();
      free_.pop_back();
      return s;
    }
    slots_.resize(slots_.size() + kFrameMax);
    return static_cast<std::uint32_t>(slots_.size() / kFrameMax - 1);
  }
  char* slot_data(std::uint32_t slot) { return slots_.data() + static_cast<std::size_t>(slot) * kFrameMax; }

  // Reads up to kBatch frames; true when the batch was full (more may wait).
  bool read_batch() {
    for (int i = 0; i < kBatch; ++i) {
      if (heap_.size() >= kMaxHeld) {
        char scratch[kFrameMax];
        if (::read(in_, scratch, sizeof scratch) <= 0) return false;
        counters_.frames++, counters_.overflow++;
        continue;
      }
      const std::uint32_t slot = take_slot();
      const ssize_t n = ::read(in_, slot_data(slot), kFrameMax);
      if (n <= 0) {
        free_.push_back(slot);
        return false;
      }
      const Nanos now = now_ns();
      counters_.frames++;
      counters_.bytes += static_cast<std::uint64_t>(n);
      const netlab::Decision d = model_.admit(now, static_cast<std::size_t>(n));
      switch (d.fate) {
        case netlab::Fate::deliver:
          if (d.reordered) counters_.reordered++;
          heap_.push(Held{d.release_at, seq_++, slot, static_cast<std::uint32_t>(n)});
          if (d.release_at <= now) release_due(now);
          continue;
        case netlab::Fate::lost: counters_.lost++; break;
        case netlab::Fate::queue_full: counters_.queue_full++; break;
        case netlab::Fate::outage: counters_.outage++; break;
      }
      free_.push_back(slot);
    }
    return true;
  }

  void release_due(Nanos now) {
    while (!heap_.empty() && heap_.top().release <= now) {
      const Held h = heap_.top();
      heap_.pop();
      if (model_.in_outage(now)) {
        counters_.outage++;
      } else if (::write(out_, slot_data(h.slot), h.len) == static_cast<ssize_t>(h.len)) {
        counters_.delivered++;
      } else {
        counters_.write_failed++;  // the far side's TAP would not take it
        counters_.last_errno = errno;
      }
      free_.push_back(h.slot);
    }
  }

  int in_, out_;
  Shared& shared_;
  Counters& counters_;
  netlab::PathModel model_;
  int wake_;
  Nanos spin_;
  std::uint64_t seen_version_ = ~0ULL;
  std::uint64_t seq_ = 0;
  std::vector<char> slots_;
  std::vector<std::uint32_t> free_;
  std::priority_queue<Held, std::vector<Held>, std::greater<Held>> heap_;
};

// KEY=VALUE (or --KEY VALUE) into params; false for an unknown key or a bad number.
bool set_param(PathParams& p, std::string key, const std::string& value) {
  for (auto& c : key)
    if (c == '_') c = '-';
  static const std::map<std::string, double PathParams::*> fields = {
      {"delay-ms", &PathParams::delay_ms},     {"jitter-ms", &PathParams::jitter_ms},
      {"loss", &PathParams::loss},             {"loss-burst", &PathParams::loss_burst},
      {"reorder", &PathParams::reorder},       {"reorder-ms", &PathParams::reorder_ms},
      {"rate-mbit", &PathParams::rate_mbit},   {"queue-ms", &PathParams::queue_ms},
      {"burst-ms", &PathParams::burst_ms}};
  auto it = fields.find(key);
  if (it == fields.end()) return false;
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (end == value.c_str() || *end != '\0' || v < 0) return false;
  p.*(it->second) = v;
  return true;
}

std::string counters_json(const Counters& c) {
  std::ostringstream o;
  o << "{\"frames\":" << c.frames << ",\"bytes\":" << c.bytes << ",\"delivered\":" << c.delivered
    << ",\"lost\":" << c.lost << ",\"queue_full\":" << c.queue_full << ",\"outage\":" << c.outage
    << ",\"reordered\":" << c.reordered << ",\"overflow\":" << c.overflow << ",\"write_failed\":" << c.write_failed
    << ",\"last_errno\":" << c.last_errno << "}";
  return o.str();
}

std::string handle_command(const std::string& line, Shared& shared, const Counters& ab, const Counters& ba) {
  std::istringstream in(line);
  std::string verb;
  in >> verb;
  if (verb == "stats") return "{\"ok\":true,\"a_to_b\":" + counters_json(ab) + ",\"b_to_a\":" + counters_json(ba) + "}";
  if (verb == "outage") {
    double ms = -1;
    in >> ms;
    if (ms < 0) return "{\"ok\":false,\"error\":\"outage MS\"}";
    shared.outage_until = now_ns() + static_cast<Nanos>(ms * 1e6);
    return "{\"ok\":true}";
  }
  if (verb == "set") {
    std::lock_guard lock(shared.mu);
    PathParams p = shared.params;
    std::string kv;
    while (in >> kv) {
      auto eq = kv.find('=');
      if (eq == std::string::npos || !set_param(p, kv.substr(0, eq), kv.substr(eq + 1)))
        return "{\"ok\":false,\"error\":\"bad setting: " + kv + "\"}";
    }
    shared.params = p;
    shared.version++;
    return "{\"ok\":true}";
  }
  return "{\"ok\":false,\"error\":\"unknown command\"}";
}

// Serves the control socket until stop; one command per connection.
void control_loop(const std::string& path, Shared& shared, const Counters& ab, const Counters& ba, int wake) {
  int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) die("control path too long");
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  ::unlink(path.c_str());
  if (::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(s, 8) != 0) die("control " + path);
  while (!shared.stop) {
    pollfd fds[2] = {{s, POLLIN, 0}, {wake, POLLIN, 0}};
    if (::poll(fds, 2, 200) <= 0 || !(fds[0].revents & POLLIN)) continue;
    int c = ::accept4(s, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    timeval tv{2, 0};
    ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string line;
    char buf[512];
    ssize_t n;
    while (line.find('\n') == std::string::npos && line.size() < 4096 && (n = ::read(c, buf, sizeof buf)) > 0)
      line.append(buf, static_cast<std::size_t>(n));
    line = line.substr(0, line.find('\n'));
    const std::string reply = handle_command(line, shared, ab, ba) + "\n";
    (void)::write(c, reply.data(), reply.size());
    ::close(c);
  }
  ::close(s);
  ::unlink(path.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  std::string ns_a, tap_a, ns_b, tap_b, control;
  std::uint64_t seed = 1;
  bool realtime = false;
  Nanos spin_ns = 150'000;
  Shared shared;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "wanbridge: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--ns-a") ns_a = value();
    else if (a == "--tap-a") tap_a = value();
    else if (a == "--ns-b") ns_b = value();
    else if (a == "--tap-b") tap_b = value();
    else if (a == "--control") control = value();
    else if (a == "--seed") seed = std::strtoull(value().c_str(), nullptr, 10);
    else if (a == "--realtime") realtime = true;
    else if (a == "--spin-us") spin_ns = static_cast<Nanos>(std::strtod(value().c_str(), nullptr) * 1000);
    else if (a.rfind("--", 0) == 0 && set_param(shared.params, a.substr(2), value())) continue;
    else {
      std::fprintf(stderr, "wanbridge: unknown or bad argument %s (see the comment at the top of wanbridge.cpp)\n",
                   a.c_str());
      return 2;
    }
  }
  if (ns_a.empty() || tap_a.empty() || ns_b.empty() || tap_b.empty()) {
    std::fprintf(stderr, "usage: wanbridge --ns-a NS --tap-a TAP --ns-b NS --tap-b TAP [path options]\n");
    return 2;
  }
  ::prctl(PR_SET_TIMERSLACK, 1UL);  // ppoll wakes on time, not up to 50 us late
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);  // threads inherit the mask; a sigwait thread takes them

  const int fd_a = open_tap(ns_a, tap_a);
  const int fd_b = open_tap(ns_b, tap_b);
  const int wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  Counters ab, ba;
  Direction a_to_b(fd_a, fd_b, shared, ab, seed, wake, spin_ns);
  Direction b_to_a(fd_b, fd_a, shared, ba, seed * 7919 + 1, wake, spin_ns);
  auto start = [&](Direction& d) {
    return std::thread([&d, realtime] {
      if (realtime) {
        sched_param sp{};
        sp.sched_priority = 10;
        if (::pthread_setschedparam(::pthread_self(), SCHED_FIFO, &sp) != 0)
          std::fprintf(stderr, "wanbridge: SCHED_FIFO refused; running with normal priority\n");
      }
      d.run();
    });
  };
  std::thread t1 = start(a_to_b), t2 = start(b_to_a);
  std::thread signal_waiter([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    shared.stop = true;
    const std::uint64_t one = 1;
    (void)::write(wake, &one, sizeof one);
  });
  std::printf("{\"event\":\"ready\"}\n");
  std::fflush(stdout);
  if (!control.empty()) control_loop(control, shared, ab, ba, wake);
  signal_waiter.join();
  t1.join();
  t2.join();
  std::fprintf(stderr, "wanbridge: a->b %s\nwanbridge: b->a %s\n", counters_json(ab).c_str(), counters_json(ba).c_str());
  return 0;
}
