// `runsnack run` and `runsnack cp`: sync the working folder, run a command in
// the provider's sandbox with its output streamed back, copy files either way
// (services/exec/exec_service.hpp has the protocol).
#include "cli/cmd_shell.hpp"
#include "cli/command.hpp"
#include "cli/command_words.hpp"
#include "cli/link_arg.hpp"
#include "cli/session_runner.hpp"
#include "core/duration.hpp"
#include "core/json_fields.hpp"
#include "core/paths.hpp"
#include "core/printable.hpp"
#include "services/exec/detached_commands.hpp"
#include "services/exec/exec_service.hpp"
#include "services/exec/run_terms.hpp"
#include "services/fs/path_rules.hpp"
#include "services/fs/transfer.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <iostream>
#include <memory>
#include <sstream>

namespace runsnack::cli {

namespace asio = boost::asio;
namespace sfs = std::filesystem;

namespace {

struct RunArgs {
  std::string link;
  std::vector<int> gpus;
  std::vector<std::string> env;
  bool no_sync = false;
  std::string sync_dir;
  std::string timeout;
  std::vector<std::string> pull;
  std::string max_pull;
  std::vector<std::string> command;
  bool json = false;
};

struct CpArgs {
  std::vector<std::string> words;  // [LINK] SRC... DST as given
  std::string link, dst;
  std::vector<std::string> srcs;
  std::string max_pull;
  bool json = false;
};

// SRCs of one cp, LINK and DST besides: as many as one pull's paths (the provider's bound).
constexpr int kMaxCpWords = 256 + 2;

// What one pull or `cp` from the workspace may write here (file data; holes of sparse files do
// not count): the provider's files must not fill this disk.
constexpr const char* kDefaultMaxPull = "10G";

Result<fs::ReceiveLimits> pull_limits(const std::string& flag) {
  auto bytes = exec::parse_size(flag.empty() ? kDefaultMaxPull : flag);
  if (!bytes) return Error(bytes.error().code, "--max-pull: " + bytes.error().what());
  fs::ReceiveLimits limits;
  limits.write.max_bytes = *bytes;
  limits.write.over_message = "the pull is over its " + exec::size_text(*bytes) + " limit (--max-pull)";
  return limits;
}

// The counters of one transfer, for --json.
nlohmann::json stats_json(const char* event, const fs::TransferStats& s) {
  return {{"event", event},       {"entries", s.entries},           {"files", s.files_sent},
          {"bytes", s.bytes},     {"wire_bytes", s.wire_bytes},     {"reused_bytes", s.reused_bytes},
          {"deleted", s.deleted}, {"unchanged", s.unchanged}};
}

fs::IgnoreRules ignore_rules_for(const sfs::path& root) {
  fs::IgnoreRules rules;
  for (const char* name : fs::kIgnoreRuleFiles) {
    std::ifstream in(root / name);
    if (!in) continue;
    std::stringstream text;
    text << in.rdbuf();
    rules.add_file_text(text.str());
  }
  return rules;
}

sfs::path cache_file_for(const sfs::path& root) {
  auto dir = state_dir();
  if (!dir) return {};
  sfs::create_directories(*dir / "sync-cache");
  std::string key = root.string();
  return *dir / "sync-cache" / (fs::sha256_hex(key.data(), key.size()).substr(0, 32) + ".hashes");
}

std::string human(std::uint64_t n) {
  char buf[32];
  if (n < 1024) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(n));
  else if (n < 1024 * 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", n / 1024.0);
  else std::snprintf(buf, sizeof buf, "%.1f MiB", n / 1048576.0);
  return buf;
}

std::string clock_text(double seconds) {
  const auto s = static_cast<long long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
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

using ScanJob = std::future<Result<std::vector<fs::Entry>>>;

// Waits for a scan running on a thread of its own (hashing a large tree takes seconds, and the
// session's keepalive must be answered meanwhile).
asio::awaitable<Result<std::vector<fs::Entry>>> scan_result(ScanJob& job) {
  asio::steady_timer tick(co_await asio::this_coro::executor);
  while (job.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    tick.expires_after(std::chrono::milliseconds(1));
    co_await tick.async_wait(asio::use_awaitable);
  }
  co_return job.get();
}

asio::awaitable<Result<std::vector<fs::Entry>>> scan_off_thread(int root, std::string prefix, fs::IgnoreRules rules,
                                                                fs::HashCache* cache) {
  ScanJob job = std::async(std::launch::async, [&] { return fs::scan_tree(root, prefix, rules, cache); });
  co_return co_await scan_result(job);
}

// The folder `run` syncs, its scan started before the session is set up, so that the walk
// (and any hashing) overlaps the connection.
struct SyncSource {
  sfs::path path;
  fs::UniqueFd root;
  fs::HashCache cache;
  sfs::path cache_file;
  fs::IgnoreRules rules;
  ScanJob scan;  // not valid with --no-sync
};

asio::awaitable<Result<std::shared_ptr<MuxStream>>> open_mode(Session& session, const char* service, nlohmann::json args) {
  StreamHeader header{service, std::move(args)};
  co_return co_await session.open(header);
}

// Sends `entries` (read from `root`) to the provider: cp put.
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

// Receives files from the provider into `root`: run --pull and cp get. The receiver checks every
// path and symlink (a symlink chain that resolves outside `root` is refused) and `limits`.
asio::awaitable<Result<fs::TransferStats>> download(Session& session, const char* service, nlohmann::json args, int root,
                                                    fs::ReceiveLimits limits) {
  auto stream = co_await open_mode(session, service, std::move(args));
  if (!stream) co_return stream.error();
  const fs::Progress bar = progress_bar("pull");
  auto stats = co_await fs::receive_tree(**stream, root, limits, nullptr, bar);
  (void)co_await (*stream)->close_write();
  co_return stats;
}

// Ctrl-C: the first is SIGINT to the remote command, the second SIGKILL.
asio::awaitable<void> forward_signals(std::shared_ptr<MuxStream> stream, std::shared_ptr<asio::signal_set> signals) {
  int count = 0;
  for (;;) {
    auto [ec, sig] = co_await signals->async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
    ++count;
    int remote = (count == 1 && sig == SIGINT) ? SIGINT : SIGKILL;
    std::fprintf(stderr, remote == SIGINT ? "\nrunsnack: interrupting the remote command (Ctrl-C again kills it)\n"
                                          : "\nrunsnack: killing the remote command\n");
    const nlohmann::json msg = {{"type", "signal"}, {"signal", remote}};
    if (!co_await fs::write_control(*stream, msg)) co_return;
  }
}

void write_all(int fd, const std::vector<std::uint8_t>& data) {
  std::size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n <= 0) return;
    off += static_cast<std::size_t>(n);
  }
}

// What a run keeps across sessions: the running command's token and how much of its output arrived.
struct AttachState {
  std::string token;
  std::uint64_t out_bytes = 0, err_bytes = 0;
};

asio::awaitable<int> run_body(const RunArgs& args, SyncSource& source, AttachState& attach, Session& session) {
  if (source.scan.valid()) {
    // Opened before waiting for the scan: the provider checks its copy of the workspace meanwhile.
    const nlohmann::json sync_args = {{"mode", "sync"}};
    auto sync_stream = co_await open_mode(session, exec::kServiceRun, sync_args);
    if (!sync_stream) co_return report(Error(sync_stream.error().code, "sync failed: " + sync_stream.error().what()));
    auto entries = co_await scan_result(source.scan);
    if (!entries) co_return report(entries.error());
    source.cache.retain(*entries);
    source.cache.save(source.cache_file);
    const fs::Progress bar = progress_bar("sync");
    auto stats = co_await fs::send_tree(**sync_stream, source.root.get(), *entries, bar, {}, &source.cache);
    (void)co_await (*sync_stream)->close_write();
    if (!stats) co_return report(Error(stats.error().code, "sync failed: " + stats.error().what()));
    if (stats->files_sent > 0)
      std::cerr << "sync: " << stats->files_sent << " of " << stats->entries << " entries sent, " << human(stats->bytes)
                << " (" << human(stats->wire_bytes) << " on the wire)" << std::endl;
    if (stats->deleted > 0) std::cerr << "sync: " << stats->deleted << " deleted in the workspace" << std::endl;
    if (args.json) std::cerr << stats_json("sync", *stats).dump() << std::endl;
  }

  nlohmann::json req = {{"type", "exec"}, {"argv", args.command}};
  nlohmann::json env = nlohmann::json::object();
  for (const auto& kv : args.env) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) co_return report("bad --env '" + kv + "': expected KEY=VALUE");
    env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  req["env"] = env;
  if (!args.gpus.empty()) req["gpus"] = args.gpus;
  if (!args.timeout.empty()) {
    auto d = parse_duration(args.timeout);
    if (!d) co_return report(d.error());
    req["timeout_s"] = std::chrono::duration<double>(*d).count();
  }
  // A session that went silent under a running command: the provider keeps the command for a
  // while (services/exec/detached_commands.hpp); a new session re-attaches to it.
  const bool reattach = !attach.token.empty();
  const nlohmann::json exec_args = reattach ? nlohmann::json{{"mode", "attach"}, {"token", attach.token},
                                                             {"out", attach.out_bytes}, {"err", attach.err_bytes}}
                                            : nlohmann::json{{"mode", "exec"}};
  auto stream = co_await open_mode(session, exec::kServiceRun, exec_args);
  if (!stream) co_return report(stream.error());
  if (!reattach)
    if (auto r = co_await fs::write_control(**stream, req); !r) co_return report(r.error());

  auto signals = std::make_shared<asio::signal_set>(co_await asio::this_coro::executor, SIGINT, SIGTERM);
  asio::co_spawn(co_await asio::this_coro::executor, forward_signals(*stream, signals), asio::detached);
  int status = -1;
  std::string failure;
  for (;;) {
    auto f = co_await fs::read_frame(**stream);
    if (!f) {
      const auto why = session.mux().close_reason();
      if (why && why->is(errc::timeout) && !attach.token.empty()) {
        signals->cancel();
        std::cerr << "runsnack: the session went silent (" << why->what()
                  << "); the remote command keeps running, re-attaching..." << std::endl;
        co_return kReconnect;
      }
      failure = session.mux().is_closed() ? "the session ended (the provider stopped, or revoked the link, or it expired)"
                                          : f.error().what();
      break;
    }
    if (f->type == fs::FrameType::out) {
      write_all(STDOUT_FILENO, f->payload);
      attach.out_bytes += f->payload.size();
    } else if (f->type == fs::FrameType::err) {
      write_all(STDERR_FILENO, f->payload);
      attach.err_bytes += f->payload.size();
    } else if (f->type == fs::FrameType::control) {
      auto j = fs::decode_control(f->payload);
      if (!j) continue;
      if ((*j)["type"] == "started") attach.token = string_or(*j, "token");
      if ((*j)["type"] == "attached") {
        const auto lost = int_or(*j, "lost_out", 0) + int_or(*j, "lost_err", 0);
        std::cerr << "runsnack: re-attached to the remote command";
        if (lost > 0) std::cerr << " (" << lost << " bytes of its output were lost)";
        std::cerr << std::endl;
      }
      if ((*j)["type"] == "error") {
        failure = string_or(*j, "message", "the provider refused");
        break;
      }
      if ((*j)["type"] == "exit") {
        status = int_or(*j, "status", 1);
        std::string reason = string_or(*j, "reason");
        if (reason.starts_with("the command was stopped")) std::cerr << "runsnack: " << printable(reason) << std::endl;
        else if (!reason.empty()) std::cerr << "runsnack: remote command stopped: " << printable(reason) << std::endl;
        // A command the provider could not start (not found: 127; not executable: 126), in one line.
        const std::string message = string_or(*j, "message");
        if (!message.empty()) std::cerr << "runsnack: " << printable(message) << std::endl;
        const std::string notice = string_or(*j, "notice");
        if (!notice.empty()) std::cerr << "runsnack: " << printable(notice) << std::endl;
        break;
      }
    }
  }
  signals->cancel();
  (void)co_await (*stream)->close_write();
  if (status < 0) co_return report(failure);

  if (!args.pull.empty()) {
    auto limits = pull_limits(args.max_pull);
    if (!limits) co_return report(limits.error());
    const nlohmann::json pull_args = {{"mode", "pull"}, {"paths", args.pull}};
    limits->asked = args.pull;  // nothing else may land in this folder
    auto stats = co_await download(session, exec::kServiceRun, pull_args, source.root.get(), *limits);
    if (!stats) co_return report(Error(stats.error().code, "pull failed: " + stats.error().what()));
  }
  co_return status;
}

// "out//" -> "out": what users type; a trailing slash only says "a folder".
std::string without_trailing_slashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

// --pull PATH: relative to the workspace and to this folder alike; "out/" is "out". Checked
// before the command runs, not after.
int check_pull_paths(std::vector<std::string>& paths) {
  for (auto& p : paths) {
    p = without_trailing_slashes(p);
    if (auto parts = fs::split_relative_path(p); !parts) {
      report("--pull " + parts.error().what() + " (give a path inside the workspace, e.g. --pull out/)");
      return kExitUsage;
    }
  }
  return 0;
}

int run(RunArgs& args) {
  if (args.command.empty()) return report("nothing to run: give the command after --, e.g. runsnack run LINK -- python train.py");
  if (int bad = check_pull_paths(args.pull)) return bad;
  SyncSource source;
  source.path = args.sync_dir.empty() ? sfs::current_path() : sfs::absolute(args.sync_dir);
  auto root = fs::open_root(source.path, false);
  if (!root) return report(root.error());
  source.root = std::move(*root);
  SessionCommand command;
  command.link_arg = args.link;
  if (!args.no_sync)
    command.before_connect = [&source] {
      source.scan = std::async(std::launch::async, [&source] {
        source.cache_file = cache_file_for(source.path);
        source.cache.load(source.cache_file);
        source.rules = ignore_rules_for(source.path);
        return fs::scan_tree(source.root.get(), "", source.rules, &source.cache);
      });
    };
  AttachState attach;
  command.reconnect_for = exec::kReattachWithin;  // the provider keeps a command no longer
  command.body = [&args, &source, &attach](Session& session) -> asio::awaitable<int> {
    co_return co_await run_body(args, source, attach, session);
  };
  const int status = run_session_command(command);
  if (source.scan.valid()) source.scan.wait();  // it uses `source`, whatever became of the session
  return status;
}

constexpr std::string_view kRemote = "remote:";

void add_stats(fs::TransferStats& sum, const fs::TransferStats& s) {
  sum.entries += s.entries;
  sum.files_sent += s.files_sent;
  sum.bytes += s.bytes;
  sum.reused_bytes += s.reused_bytes;
  sum.wire_bytes += s.wire_bytes;
}

int print_cp_stats(const CpArgs& args, const fs::TransferStats& stats, const char* verb) {
  if (args.json) std::cout << stats_json("cp", stats).dump() << std::endl;
  else std::cerr << "cp: " << stats.files_sent << " files, " << human(stats.bytes) << " " << verb << std::endl;
  return 0;
}

// What the workspace holds at `path` ("dir", "file", "link", "none"), symlinks on the way followed
// inside it; "" from a provider too old to say (it answers "unknown cp mode").
asio::awaitable<Result<std::string>> remote_kind(Session& session, const std::string& path) {
  const nlohmann::json stat_args = {{"mode", "stat"}, {"path", path}};
  auto stream = co_await open_mode(session, exec::kServiceCp, stat_args);
  if (!stream) co_return stream.error();
  auto answer = co_await fs::read_control(**stream);  // an error frame comes back as an error
  (void)co_await (*stream)->close_write();
  if (!answer && answer.error().what() == "unknown cp mode") co_return std::string("");
  if (!answer) co_return answer.error();
  if ((*answer)["type"] != "stat") co_return Error(errc::malformed, "expected the provider's stat answer");
  co_return string_or(*answer, "kind");
}

// Local SRC... -> remote:DST. DST ending in '/' (or empty), or an existing remote folder, receives
// each SRC by its name (a missing one is created); otherwise the single SRC is copied to that name.
asio::awaitable<int> cp_put(const CpArgs& args, Session& session) {
  std::string dst = without_trailing_slashes(args.dst.substr(kRemote.size()));
  bool into = dst.empty() || args.dst.ends_with('/');
  if (dst == "/") co_return report("refused path '/': absolute paths are not allowed; remote:PATH is relative to the workspace");
  if (!into) {
    auto kind = co_await remote_kind(session, dst);
    if (!kind) co_return report(kind.error());
    into = *kind == "dir";
  }
  if (args.srcs.size() > 1 && !into)
    co_return report("several sources need a folder to copy into: end the destination with / (remote:" + dst +
                     "/, created when missing) or name an existing folder");
  fs::TransferStats total;
  for (const auto& word : args.srcs) {
    sfs::path src = sfs::absolute(word).lexically_normal();
    if (src.filename().empty()) src = src.parent_path();
    std::error_code ec;
    const auto status = sfs::symlink_status(src, ec);
    if (ec || !sfs::exists(status)) co_return report(word + ": no such file or folder");
    if (word.ends_with('/') && !sfs::is_directory(sfs::status(src, ec)))
      co_return report(word + ": not a folder (leave out the trailing /)");
    const std::string leaf = src.filename().string();
    std::string dest_dir = dst, name = leaf;
    if (!into) {
      const auto slash = dst.rfind('/');
      dest_dir = slash == std::string::npos ? "" : dst.substr(0, slash);
      name = dst.substr(slash == std::string::npos ? 0 : slash + 1);
    }
    auto root = fs::open_root(src.parent_path(), false);
    if (!root) co_return report(root.error());
    fs::IgnoreRules rules;
    fs::HashCache scanned;  // this scan's hashes: the sender vouches for files unchanged since
    auto entries = co_await scan_off_thread(root->get(), leaf, rules, &scanned);
    if (!entries) co_return report(entries.error());
    for (auto& e : *entries) e.path = name + e.path.substr(leaf.size());
    const nlohmann::json put_args = {{"mode", "put"}, {"dest", dest_dir}};
    std::vector<fs::PathRename> renames;
    if (name != leaf) renames.push_back({name, leaf});
    auto stats = co_await upload(session, exec::kServiceCp, put_args, root->get(), std::move(*entries), renames, &scanned);
    if (!stats) co_return report(stats.error());
    add_stats(total, *stats);
  }
  co_return print_cp_stats(args, total, "sent");
}

// remote:SRC... -> local DST. DST ending in '/' (created when missing) or an existing folder
// receives each SRC by its name (a nested SRC without the folders above it); otherwise the single
// SRC is copied to that name. --max-pull bounds all sources together.
asio::awaitable<int> cp_get(const CpArgs& args, Session& session) {
  const sfs::path dst = sfs::absolute(args.dst);
  std::error_code ec;
  const bool into = args.dst.ends_with('/') || sfs::is_directory(dst, ec);
  if (args.srcs.size() > 1 && !into)
    co_return report("several sources need a folder to copy into: end the destination with / (" + args.dst +
                     "/, created when missing) or name an existing folder");
  auto limits = pull_limits(args.max_pull);
  if (!limits) co_return report(limits.error());
  fs::TransferStats total;
  for (const auto& word : args.srcs) {
    const bool folder = word.ends_with('/');
    const std::string src = without_trailing_slashes(word.substr(kRemote.size()));
    if (src.empty() || src == "/")
      co_return report("'" + word + "' names the whole workspace: name a path in it, e.g. remote:out");
    const std::string leaf = src.substr(src.rfind('/') == std::string::npos ? 0 : src.rfind('/') + 1);
    const sfs::path local_dir = into ? dst : dst.parent_path();
    const std::string as = into ? leaf : dst.filename().string();
    auto root = fs::open_root(local_dir, true);
    if (!root) co_return report(root.error());
    nlohmann::json get_args = {{"mode", "get"}, {"path", src}, {"as", as}};
    if (folder) get_args["folder"] = true;
    fs::ReceiveLimits these = *limits;
    these.asked = {as};  // nothing else may land here
    auto stats = co_await download(session, exec::kServiceCp, get_args, root->get(), these);
    if (!stats) {
      if (src.find('/') != std::string::npos && stats.error().what().find("not asked for") != std::string::npos)
        co_return report(stats.error().what() + " (a provider older than this RunSnack sends a nested path with the "
                                                "folders above it: update it, or copy the top folder)");
      co_return report(stats.error());
    }
    add_stats(total, *stats);
    // The next source may write only what is left of --max-pull.
    const std::uint64_t written = stats->bytes + stats->reused_bytes;
    if (auto& left = limits->write.max_bytes) *left -= std::min(*left, written);
  }
  co_return print_cp_stats(args, total, "received");
}

asio::awaitable<int> cp_body(const CpArgs& args, Session& session) {
  std::size_t remote_srcs = 0;
  for (const auto& s : args.srcs) remote_srcs += s.starts_with(kRemote);
  const bool dst_remote = args.dst.starts_with(kRemote);
  if (dst_remote ? remote_srcs != 0 : remote_srcs != args.srcs.size())
    co_return report("cp copies one way: every SRC local and DST remote:PATH, or every SRC remote:PATH and DST local "
                     "(e.g. runsnack cp LINK remote:out ./)");
  // Not `c ? co_await a : co_await b`: GCC 12 runs both.
  if (dst_remote) co_return co_await cp_put(args, session);
  co_return co_await cp_get(args, session);
}

// [LINK] SRC... DST: the first word is LINK, except that with RUNSNACK_LINK set it may be left
// out; then a first word that names a workspace path (remote:...) or an existing local one is a SRC.
Result<void> split_cp_words(CpArgs& cp) {
  const char* env = std::getenv("RUNSNACK_LINK");
  const bool env_link = env && *env;
  const std::string& first = cp.words.front();
  std::error_code ec;
  const bool is_path = first.starts_with(kRemote) || sfs::exists(sfs::symlink_status(first, ec));
  std::size_t at = 0;
  if (cp.words.size() >= 3 && !(env_link && is_path)) cp.link = cp.words[at++];
  cp.srcs.assign(cp.words.begin() + static_cast<std::ptrdiff_t>(at), cp.words.end() - 1);
  cp.dst = cp.words.back();
  if (cp.srcs.empty()) return fail(errc::invalid_argument, "cp needs SRC and DST after LINK: runsnack cp LINK SRC... DST");
  return {};
}

}  // namespace

void add_run_commands(CLI::App& app, ExitStatus& status) {
  auto args = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand("run", "Sync this folder to the provider and run a command there, sandboxed");
  cmd->add_option("LINK", args->link, kLinkHelp);
  cmd->add_option("--gpu", args->gpus, "GPU index to use (repeatable; default: all the link shares)")->allow_extra_args(false);
  cmd->add_option("--env", args->env, "KEY=VALUE for the remote command (repeatable)")->allow_extra_args(false);
  cmd->add_flag("--no-sync", args->no_sync, "Do not sync; run in the workspace as it is");
  cmd->add_option("--sync", args->sync_dir, "Sync this folder instead of the current one");
  cmd->add_option("--timeout", args->timeout, "Stop the command after this long: 30s, 10m, 2h");
  cmd->add_option("--pull", args->pull,
                  "Copy this workspace path back when the command ends, to the same path here (repeatable; a file or "
                  "folder at any depth: --pull out/ --pull logs/run1/metrics.csv)")
      ->allow_extra_args(false);
  cmd->add_option("--max-pull", args->max_pull,
                  "Refuse a pull that would write more file data than this here, e.g. 500M, 50G (default 10G; holes "
                  "of sparse files do not count)");
  cmd->add_flag("--json", args->json, "Also print the sync's counters as one JSON line on stderr (stdout is the command's)");
  cmd->add_option("CMD", args->command, "The command and its arguments, after -- (all words after -- are CMD)");
  cmd->footer("Exits with the remote command's status (128+N when killed by signal N). Ctrl-C interrupts the\n"
              "remote command; a second Ctrl-C kills it. .gitignore and .runsnackignore rules apply to the sync.\n"
              "The command runs in the provider's sandbox: an unprivileged user of its own, no capabilities, a\n"
              "seccomp filter, the workspace as its only writable folder besides /tmp and /dev/shm (both count\n"
              "against the provider's --memory). --timeout and the provider's --run-timeout stop it on time\n"
              "whether or not its output is being read. --pull keeps the workspace path under this folder\n"
              "(--pull out/sub/f.txt writes ./out/sub/f.txt); a path with .. or a symlink on its way that leads\n"
              "out of the workspace is refused (and logged by the provider), and so is a pulled symlink that\n"
              "resolves outside this folder (through other symlinks too).\n"
              "With RUNSNACK_LINK set, leave LINK out: runsnack run -- python train.py");
  cmd->callback([&status, args] {
    take_command(args->command, "runsnack run [LINK] -- CMD [ARGS...]");
    run_command(status, [&] { return run(*args); });
  });

  add_shell_command(app, status);

  auto cp = std::make_shared<CpArgs>();
  auto* cpc = app.add_subcommand("cp", "Copy files or folders to or from the workspace: remote:PATH names the remote side");
  cpc->add_option("LINK SRC... DST", cp->words,
                  "LINK (may be left out when RUNSNACK_LINK is set; see runsnack info --help), then one or more SRC "
                  "and a DST: either every SRC local and DST remote:PATH, or every SRC remote:PATH and DST local")
      ->expected(2, kMaxCpWords)
      ->required();
  cpc->footer("remote:PATH is a path in the workspace at any depth (remote:inputs/data/nums.txt; remote: alone is\n"
              "the workspace as a destination). As with cp -r: a DST that ends in / (created when missing) or is an\n"
              "existing folder receives each SRC by its name, without the folders above it; otherwise the single\n"
              "SRC is copied to the name DST. Several SRCs need such a folder. A trailing / on SRC copies the\n"
              "folder itself (it must be one). A symlink on the way inside the workspace is followed; a path\n"
              "with .. or a symlink that leads out of the workspace is refused (and logged by the provider); a SRC\n"
              "that is itself a symlink is copied as a symlink.\n"
              "  runsnack cp LINK ./data remote:inputs/             upload a folder into inputs/data\n"
              "  runsnack cp LINK a.txt dir/ remote:inputs/         several sources into inputs/\n"
              "  runsnack cp LINK remote:out/logs/run1.txt ./        a nested file into ./run1.txt\n"
              "  runsnack cp LINK remote:out remote:ckpt/last.pt ./results/\n"
              "With RUNSNACK_LINK set, leave LINK out (a first word that is remote:... or an existing local path is\n"
              "a SRC): runsnack cp remote:out ./");
  cpc->add_flag("--json", cp->json, "Print the transfer's counters as one JSON object (bytes, wire_bytes, reused_bytes, ...)");
  cpc->add_option("--max-pull", cp->max_pull,
                  "From remote: refuse a copy that would write more file data than this here (default 10G)");
  cpc->callback([&status, cp] {
    if (auto r = split_cp_words(*cp); !r) {
      report(r.error());
      status.code = kExitUsage;
      return;
    }
    run_command(status, [&] {
      SessionCommand command;
      command.link_arg = cp->link;
      command.body = [cp](Session& session) -> asio::awaitable<int> { co_return co_await cp_body(*cp, session); };
      return run_session_command(command);
    });
  });
}

}  // namespace runsnack::cli
