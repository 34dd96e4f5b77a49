#include "cli/transfers.hpp"

#include "fs/tree_scan.hpp"
#include "sandbox/run_terms.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>

namespace runsnack::cli {

namespace asio = boost::asio;

namespace {

// The provider's files must not fill this disk.
constexpr const char* kDefaultMaxPull = "10G";

std::string clock_text(double seconds) {
  const auto s = static_cast<long long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
  return buf;
}

}  // namespace

Result<fs::ReceiveLimits> pull_limits(const std::string& flag) {
  auto bytes = exec::parse_size(flag.empty() ? kDefaultMaxPull : flag);
  if (!bytes) return Error(bytes.error().code, "--max-pull: " + bytes.error().what());
  fs::ReceiveLimits limits;
  limits.write.max_bytes = *bytes;
  limits.write.over_message = "the pull is over its " + exec::size_text(*bytes) + " limit (--max-pull)";
  return limits;
}

nlohmann::json stats_json(const char* event, const fs::TransferStats& s) {
  return {{"event", event},       {"entries", s.entries},           {"files", s.files_sent},
          {"bytes", s.bytes},     {"wire_bytes", s.wire_bytes},     {"reused_bytes", s.reused_bytes},
          {"deleted", s.deleted}, {"unchanged", s.unchanged}};
}

std::string human(std::uint64_t n) {
  char buf[32];
  if (n < 1024) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(n));
  else if (n < 1024 * 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", n / 1024.0);
  else std::snprintf(buf, sizeof buf, "%.1f MiB", n / 1048576.0);
  return buf;
}

// A progress bar on stderr, only for a person at a terminal and only for
// large transfers: done of total, the rate so far and the time left at it,
// redrawn at most 10 times a second.
fs::Progress progress_bar(const char* what) {
  if (!isatty(STDERR_FILENO)) return nullptr;
  using Clock = std::chrono::steady_clock;
  struct Shown {
    Clock::time_point start = Clock::now(), last{};
  };
  auto shown = std::make_shared<Shown>();
  return [what, shown](std::uint64_t done, std::uint64_t total) {
    if (total < (8u << 20)) return;
    const auto now = Clock::now();
    if (done < total && now - shown->last < std::chrono::milliseconds(100)) return;
    shown->last = now;
    const double elapsed = std::chrono::duration<double>(now - shown->start).count();
    const double rate = elapsed > 0.05 ? static_cast<double>(done) / elapsed : 0;
    int pct = static_cast<int>(done * 100 / total);
    int bars = pct / 4;
    std::string tail = human(done) + " of " + human(total);
    if (rate > 0) tail += ", " + human(static_cast<std::uint64_t>(rate)) + "/s";
    if (done >= total) tail += " in " + clock_text(elapsed);
    else if (rate > 0) tail += ", " + clock_text(static_cast<double>(total - done) / rate) + " left";
    std::fprintf(stderr, "\r\033[K%s [%.*s%*s] %3d%% %s", what, bars, "#########################", 25 - bars, "", pct,
                 tail.c_str());
    if (done >= total) std::fprintf(stderr, "\n");
  };
}

asio::awaitable<Result<std::vector<fs::Entry>>> scan_result(ScanJob& job) {
  asio::steady_timer tick(co_await asio::this_coro::executor);
  while (job.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    tick.expires_after(std::chrono::milliseconds(1));
    co_await tick.async_wait(asio::use_awaitable);
  }
  co_return job.get();
}

asio::awaitable<Result<std::vector<fs::Entry>>> scan_off_thread(int root, std::string prefix, fs::IgnoreRules rules,
                                                                fs::HashCache* cache, fs::ScanReport* report) {
  ScanJob job = std::async(std::launch::async, [&] { return fs::scan_tree(root, prefix, rules, cache, std::nullopt, nullptr, report); });
  co_return co_await scan_result(job);
}

void print_skipped(const char* label, const fs::ScanReport& report) {
  if (report.skipped.empty()) return;
  constexpr std::size_t kShown = 10;  // one line: the rest as a count
  const std::size_t n = report.skipped.size();
  std::string line = std::string(label) + ": skipped " + std::to_string(n) + (n == 1 ? " entry: " : " entries: ");
  for (std::size_t i = 0; i < std::min(n, kShown); ++i)
    line += (i ? ", " : "") + report.skipped[i].path + " (" + report.skipped[i].why + ")";
  if (n > kShown) line += ", and " + std::to_string(n - kShown) + " more";
  std::cerr << line << std::endl;
}

void print_defaulted(const char* label, const fs::ScanReport& report) {
  if (report.defaulted.empty()) return;
  // By name, in order: a project's many __pycache__ folders are one item.
  struct Group {
    std::string first_path;
    const char* what;
    std::size_t count = 0;
  };
  std::vector<std::string> order;
  std::map<std::string, Group> groups;
  for (const auto& d : report.defaulted) {
    const std::string name = d.path.substr(d.path.rfind('/') == std::string::npos ? 0 : d.path.rfind('/') + 1);
    auto [it, fresh] = groups.try_emplace(name, Group{d.path, d.what});
    if (fresh) order.push_back(name);
    ++it->second.count;
  }
  std::string line = std::string(label) + ": not sent: ";
  for (std::size_t i = 0; i < order.size(); ++i) {
    const Group& g = groups[order[i]];
    line += (i ? ", " : "") + (g.count == 1 ? g.first_path : order[i]) + " (" + g.what;
    line += g.count == 1 ? ")" : ", " + std::to_string(g.count) + " folders)";
  }
  line += "; a \"!" + order.front() + "/\" line in .runsnackignore sends it";
  std::cerr << line << std::endl;
}

asio::awaitable<Result<std::shared_ptr<MuxStream>>> open_mode(Session& session, const char* service, nlohmann::json args) {
  StreamHeader header{service, std::move(args)};
  co_return co_await session.open(header);
}

asio::awaitable<Result<fs::TransferStats>> upload(Session& session, const char* service, nlohmann::json args, int root,
                                                  std::vector<fs::Entry> entries, std::vector<fs::PathRename> renames,
                                                  const fs::HashCache* hashed) {
  auto stream = co_await open_mode(session, service, std::move(args));
  if (!stream) co_return stream.error();
  const fs::Progress bar = progress_bar("sync");
  auto stats = co_await fs::send_tree(**stream, root, entries, bar, std::move(renames), hashed);
  (void)co_await (*stream)->close_write();
  co_return stats;
}

asio::awaitable<Result<fs::TransferStats>> download(Session& session, const char* service, nlohmann::json args, int root,
                                                    fs::ReceiveLimits limits) {
  auto stream = co_await open_mode(session, service, std::move(args));
  if (!stream) co_return stream.error();
  const fs::Progress bar = progress_bar("pull");
  auto stats = co_await fs::receive_tree(**stream, root, limits, nullptr, bar);
  (void)co_await (*stream)->close_write();
  co_return stats;
}

std::string without_trailing_slashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

}  // namespace runsnack::cli
