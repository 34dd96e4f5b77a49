#include "services/exec/exec_service.hpp"

#include "core/json_fields.hpp"
#include "core/paths.hpp"
#include "services/exec/cgroup.hpp"
#include "services/exec/child_process.hpp"
#include "services/exec/detached_commands.hpp"
#include "services/exec/launch.hpp"
#include "services/exec/run_terms.hpp"
#include "services/exec/sandbox.hpp"
#include "services/exec/usage_budget.hpp"
#include "services/fs/path_rules.hpp"
#include "services/fs/transfer.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <set>

namespace runsnack::exec {

namespace asio = boost::asio;
namespace sfs = std::filesystem;
using namespace asio::experimental::awaitable_operators;

namespace {

constexpr std::size_t kMaxArgs = 4096;
constexpr std::size_t kMaxArgBytes = 64 * 1024;
constexpr std::size_t kMaxEnv = 256;
constexpr std::size_t kMaxPullPaths = 256;

void audit(const ExecContext& ctx, const std::string& kind, const std::string& decision, const std::string& reason,
           nlohmann::json detail) {
  detail["session"] = ctx.session_id;
  if (ctx.audit) ctx.audit(kind, decision, reason, detail);
}

Result<sfs::path> workspace_path(const ExecContext& ctx) { return workspace_for(ctx.consumer); }

asio::awaitable<void> refuse(MuxStream& stream, const Error& e) {
  const nlohmann::json msg = {{"type", "error"}, {"message", e.what()}};
  (void)co_await fs::write_control(stream, msg);
  (void)co_await stream.close_write();
}

struct ExecRequest {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::optional<std::vector<int>> gpus;
  std::optional<double> timeout_s;
};

Result<ExecRequest> parse_exec(const nlohmann::json& j) {
  ExecRequest r;
  if (j["type"] != "exec" || !j.contains("argv") || !j["argv"].is_array() || j["argv"].empty() ||
      j["argv"].size() > kMaxArgs)
    return fail(errc::malformed, "bad exec request");
  for (const auto& a : j["argv"]) {
    if (!a.is_string() || a.get<std::string>().size() > kMaxArgBytes) return fail(errc::malformed, "bad argument");
    r.argv.push_back(a.get<std::string>());
    if (r.argv.back().find('\0') != std::string::npos) return fail(errc::malformed, "NUL in an argument");
  }
  if (j.contains("env") && j["env"].is_object()) {
    static const std::regex name("[A-Za-z_][A-Za-z0-9_]{0,127}");
    if (j["env"].size() > kMaxEnv) return fail(errc::too_large, "too many environment variables");
    for (const auto& [k, v] : j["env"].items()) {
      if (!std::regex_match(k, name) || !v.is_string() || v.get<std::string>().size() > kMaxArgBytes ||
          v.get<std::string>().find('\0') != std::string::npos)
        return fail(errc::invalid_argument, "bad environment variable " + k.substr(0, 64));
      r.env[k] = v.get<std::string>();
    }
  }
  if (j.contains("gpus") && j["gpus"].is_array()) {
    r.gpus.emplace();
    for (const auto& g : j["gpus"]) {
      if (!g.is_number_integer()) return fail(errc::malformed, "bad gpu index");
      r.gpus->push_back(g.get<int>());
    }
  }
  if (j.contains("timeout_s") && j["timeout_s"].is_number() && j["timeout_s"].get<double>() > 0)
    r.timeout_s = j["timeout_s"].get<double>();
  return r;
}

// What the control watcher and the output pump share about one running command.
struct RunControl {
  pid_t outer = -1;       // the bwrap we forked
  pid_t inner = -1;       // bwrap's pid-namespace init, whose process group holds the command
  fs::UniqueFd info;      // read end of bwrap --info-fd
  std::optional<Cgroup> cgroup;
  bool finished = false;  // reaped: pids are no longer ours
  bool consumer_gone = false;
  std::string reason;

  void learn_inner() {
    if (inner > 0 || !info) return;
    char buf[4096];
    ssize_t n = ::read(info.get(), buf, sizeof buf - 1);
    if (n <= 0) return;
    auto j = nlohmann::json::parse(std::string(buf, static_cast<std::size_t>(n)), nullptr, false);
    if (j.is_object() && j.contains("child-pid") && j["child-pid"].is_number_integer())
      inner = j["child-pid"].get<pid_t>();
  }
  void interrupt() {
    if (finished) return;
    learn_inner();
    // The namespace's init ignores SIGINT (no handler), the command and its children get it.
    if (inner > 0) ::kill(-inner, SIGINT);
    else if (outer > 0) ::kill(outer, SIGINT);
  }
  void kill_all(const std::string& why) {
    if (finished) return;
    if (reason.empty()) reason = why;
    if (outer > 0) ::kill(outer, SIGKILL);  // --die-with-parent takes the namespace with it
    if (cgroup) cgroup->kill_all();
  }
};

// Reads the consumer's control frames while the command runs: signals, and
// the end of the stream or session, which kills the command (once the link
// has given up waiting for a re-attach, detached_commands.hpp).
asio::awaitable<void> watch_control(std::shared_ptr<CommandLink> link, std::shared_ptr<RunControl> ctl) {
  for (;;) {
    auto j = co_await link->read_control();
    if (!j) {
      if (!ctl->finished) ctl->consumer_gone = true;
      ctl->kill_all("the consumer went away");
      co_return;
    }
    if ((*j)["type"] != "signal" || !(*j)["signal"].is_number_integer()) continue;
    int sig = (*j)["signal"].get<int>();
    if (sig == SIGINT) ctl->interrupt();
    else if (sig == SIGKILL) ctl->kill_all("killed by the consumer (second Ctrl-C)");
  }
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Streams the command's stdout/stderr as frames until both pipes close; kills it at the deadline.
asio::awaitable<void> pump_output(CommandLink& link, fs::UniqueFd out_fd, fs::UniqueFd err_fd,
                                  std::chrono::steady_clock::time_point deadline, std::shared_ptr<RunControl> ctl) {
  auto ex = co_await asio::this_coro::executor;
  set_nonblocking(out_fd.get());
  set_nonblocking(err_fd.get());
  asio::posix::stream_descriptor out(ex, out_fd.release()), err(ex, err_fd.release());
  asio::steady_timer timer(ex, deadline);
  bool out_open = true, err_open = true, send_ok = true;
  std::vector<std::uint8_t> buf(fs::kMaxDataBytes);
  auto rd = asio::posix::stream_descriptor::wait_read;
  auto tok = asio::as_tuple(asio::use_awaitable);
  while (out_open || err_open) {
    if (out_open && err_open) co_await (out.async_wait(rd, tok) || err.async_wait(rd, tok) || timer.async_wait(tok));
    else if (out_open) co_await (out.async_wait(rd, tok) || timer.async_wait(tok));
    else co_await (err.async_wait(rd, tok) || timer.async_wait(tok));
    if (std::chrono::steady_clock::now() >= deadline && ctl->reason.empty()) {
      ctl->kill_all("the wall-clock limit was reached");
      timer.expires_at(std::chrono::steady_clock::time_point::max());
    }
    for (int which = 0; which < 2; ++which) {
      bool& open = which == 0 ? out_open : err_open;
      auto& d = which == 0 ? out : err;
      if (!open) continue;
      ssize_t n = ::read(d.native_handle(), buf.data(), buf.size());
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        open = false;
        continue;
      }
      if (n < 0 || !send_ok) continue;
      const std::span<const std::uint8_t> chunk(buf.data(), static_cast<std::size_t>(n));
      auto type = which == 0 ? fs::FrameType::out : fs::FrameType::err;
      if (!co_await link.write_output(type, chunk)) send_ok = false;
    }
  }
}

asio::awaitable<void> run_exec(std::shared_ptr<MuxStream> stream, const ExecContext& ctx) {
  auto msg = co_await fs::read_control(*stream);
  if (!msg) co_return;
  auto req = parse_exec(*msg);
  if (!req) co_return co_await refuse(*stream, req.error());
  RunTerms terms = RunTerms::from_json(field_or(ctx.grant.terms, "run"));

  const std::vector<int> allowed = allowed_gpus(ctx.grant);
  std::vector<int> gpus = allowed;
  if (req->gpus) {
    gpus = *req->gpus;
    for (int g : gpus)
      if (std::find(allowed.begin(), allowed.end(), g) == allowed.end())
        {
          const Error why = Error(errc::refused, "GPU " + std::to_string(g) + " is not shared by this link");
          co_return co_await refuse(*stream, why);
        }
  }

  auto budget = std::make_shared<UsageBudget>(ctx.grant, terms, gpus.size());
  if (auto why = budget->spent(0, 0)) {
    const Error spent(errc::exhausted, *why);
    co_return co_await refuse(*stream, spent);
  }

  auto ws = workspace_path(ctx);
  if (!ws) co_return co_await refuse(*stream, ws.error());
  if (auto root = fs::open_root(*ws, true); !root) co_return co_await refuse(*stream, root.error());

  auto ctl = std::make_shared<RunControl>();
  static std::atomic<std::uint64_t> counter{0};
  LaunchLimits launch = prepare_limits(terms, "runsnack-" + ctx.session_id + "-" + std::to_string(++counter));
  if (launch.cgroup) ctl->cgroup.emplace(std::move(*launch.cgroup));
  const std::vector<std::pair<int, rlim_t>> rlimits = launch.rlimits;
  const std::string limits_mode = launch.mode;

  int info[2];
  if (::pipe2(info, O_CLOEXEC | O_NONBLOCK) != 0) {
    const Error why(errc::io_error, "pipe");
    co_return co_await refuse(*stream, why);
  }
  ctl->info = fs::UniqueFd(info[0]);
  fs::UniqueFd info_w(info[1]);

  SandboxSpec spec;
  spec.workspace = *ws;
  spec.argv = req->argv;
  spec.env = req->env;
  spec.limits = {terms.memory_bytes, terms.max_procs, std::nullopt};
  spec.gpus = gpus;
  spec.network = terms.network;
  if (auto sd = state_dir()) spec.hidden.push_back(*sd);
  if (const char* home = std::getenv("HOME")) spec.hidden.emplace_back(home);
  spec.info_fd = 3;
  Sandbox sandbox(spec);
  SpawnOptions opts{sandbox.argv(), sandbox.envp(), {}, rlimits, info_w.get()};
  if (ctl->cgroup) opts.cgroup_procs_fds = ctl->cgroup->procs_fds();
  auto child = ChildProcess::spawn(opts);
  info_w = fs::UniqueFd();
  if (!child) co_return co_await refuse(*stream, child.error());
  ctl->outer = child->pid();

  std::string command_line;
  for (const auto& a : req->argv) command_line += (command_line.empty() ? "" : " ") + a;
  nlohmann::json limits = terms.to_json();
  limits["enforced_by"] = limits_mode;
  limits["gpus"] = gpus;
  audit(ctx, "run_start", "accept", "", {{"command", command_line.substr(0, 1000)}, {"limits", limits}});
  auto link = CommandLink::create(stream, ctx.consumer);
  nlohmann::json started = {{"type", "started"}, {"limits", limits}};
  if (!link->token().empty()) started["token"] = link->token();
  (void)co_await link->write_control(started);

  asio::co_spawn(co_await asio::this_coro::executor, watch_control(link, ctl), asio::detached);
  // Named first: GCC 12 mishandles temporaries in an expression that also co_awaits.
  const auto executor = co_await asio::this_coro::executor;
  std::function<void(const std::string&)> stop = [ctl](const std::string& why) { ctl->kill_all(why); };
  auto budget_done = watch_budget(executor, budget, ctl->outer, stop);

  std::optional<double> timeout = terms.timeout_s;
  if (req->timeout_s && (!timeout || *req->timeout_s < *timeout)) timeout = req->timeout_s;
  auto start = std::chrono::steady_clock::now();
  auto deadline = timeout ? start + std::chrono::milliseconds(static_cast<std::int64_t>(*timeout * 1000))
                          : std::chrono::steady_clock::time_point::max();
  co_await pump_output(*link, child->take_stdout(), child->take_stderr(), deadline, ctl);
  ExitInfo exit = co_await child->wait();
  ctl->finished = true;
  std::optional<std::uint64_t> peak = ctl->cgroup ? ctl->cgroup->peak_memory() : std::nullopt;
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  *budget_done = true;
  budget->record(exit.cpu_user_s + exit.cpu_sys_s, seconds);

  nlohmann::json detail = {{"command", command_line.substr(0, 1000)},
                           {"exit_status", exit.status},
                           {"signal", exit.signal ? nlohmann::json(*exit.signal) : nlohmann::json(nullptr)},
                           {"seconds", seconds},
                           {"cpu_user_s", exit.cpu_user_s},
                           {"cpu_sys_s", exit.cpu_sys_s},
                           {"peak_memory_bytes", peak.value_or(exit.max_rss_bytes)}};
  audit(ctx, "run_end", "", ctl->reason, detail);
  if (!ctl->consumer_gone) {
    const nlohmann::json done = {{"type", "exit"}, {"status", exit.status},
                                 {"signal", exit.signal ? nlohmann::json(*exit.signal) : nlohmann::json(nullptr)},
                                 {"reason", ctl->reason}, {"seconds", seconds}};
    (void)co_await link->write_control(done);
  }
  // After the answer, which need not wait for it: the pid namespace died with its init, so
  // nothing of the command runs any more; this kills any straggler and removes the group.
  ctl->cgroup.reset();
  if (!ctl->consumer_gone) co_await link->close_write();
}

// Each consumer's SyncState, kept in this process between syncs: loading a 16k-entry state from
// disk took as long as checking the workspace against it. A sync takes its consumer's state out
// (a second sync at the same time loads its own from disk) and puts it back after a sync that
// succeeded; after a failed one the next sync loads the state last saved.
class KeptSyncStates {
 public:
  std::unique_ptr<fs::SyncState> take(const std::string& key, const sfs::path& base) {
    {
      std::lock_guard lock(mutex_);
      if (auto it = states_.find(key); it != states_.end()) {
        auto state = std::move(it->second);
        states_.erase(it);
        return state;
      }
    }
    auto state = std::make_unique<fs::SyncState>();
    state->load(base);
    return state;
  }
  void put_back(const std::string& key, std::unique_ptr<fs::SyncState> state) {
    std::lock_guard lock(mutex_);
    if (states_.size() >= kMaxKept) states_.erase(states_.begin());  // a state that is not here is loaded from disk
    states_[key] = std::move(state);
  }

 private:
  static constexpr std::size_t kMaxKept = 16;
  std::mutex mutex_;
  std::map<std::string, std::unique_ptr<fs::SyncState>> states_;
};

KeptSyncStates& kept_sync_states() {
  static KeptSyncStates states;
  return states;
}

// `whole`: the run sync of the whole workspace (remembered state, deletions); otherwise cp put into `dest`.
asio::awaitable<void> run_sync(std::shared_ptr<MuxStream> stream, const ExecContext& ctx, const sfs::path& dest_dir,
                               const std::string& dest, bool whole) {
  RunTerms terms = RunTerms::from_json(field_or(ctx.grant.terms, "run"));
  auto ws = workspace_path(ctx);
  if (!ws) co_return co_await refuse(*stream, ws.error());
  auto root = fs::open_root(*ws, true);
  if (!root) co_return co_await refuse(*stream, root.error());
  if (!dest.empty())
    if (auto parts = fs::split_relative_path(dest); !parts) co_return co_await refuse(*stream, parts.error());
  auto target = fs::open_dir(root->get(), dest, true);
  if (!target) co_return co_await refuse(*stream, target.error());
  // The run sync keeps a SyncState (fast no-change answer, deletions); cp does not.
  const sfs::path state_base = dest_dir / (ctx.consumer.str() + ".sync");
  std::unique_ptr<fs::SyncState> state = whole ? kept_sync_states().take(state_base.string(), state_base) : nullptr;
  const fs::ReceiveLimits limits{terms.disk_quota_bytes};
  const fs::Progress no_progress;
  auto stats = co_await fs::receive_tree(*stream, target->get(), limits, state.get(), no_progress);
  if (state && stats) {
    if (!stats->unchanged) state->save(state_base);
    kept_sync_states().put_back(state_base.string(), std::move(state));
  }
  if (!stats) {
    audit(ctx, "sync", "refuse", stats.error().what(), {{"dest", dest}});
    (void)co_await stream->close_write();
    co_return;
  }
  audit(ctx, "sync", "accept", "", {{"dest", dest}, {"entries", stats->entries}, {"files", stats->files_sent},
                                     {"bytes", stats->bytes}, {"deleted", stats->deleted}});
  (void)co_await stream->close_write();
}

asio::awaitable<void> run_send(std::shared_ptr<MuxStream> stream, const ExecContext& ctx,
                               std::vector<std::string> paths, std::string rename_as) {
  auto ws = workspace_path(ctx);
  if (!ws) co_return co_await refuse(*stream, ws.error());
  auto root = fs::open_root(*ws, true);
  if (!root) co_return co_await refuse(*stream, root.error());
  if (paths.empty() || paths.size() > kMaxPullPaths)
    {
      const Error why = Error(errc::invalid_argument, "bad list of paths");
      co_return co_await refuse(*stream, why);
    }
  std::vector<fs::Entry> entries;
  std::set<std::string> seen;
  fs::IgnoreRules none;
  for (const auto& p : paths) {
    if (auto parts = fs::split_relative_path(p); !parts) co_return co_await refuse(*stream, parts.error());
    // Parents first, so the receiver creates them as folders.
    for (std::size_t at = p.find('/'); at != std::string::npos; at = p.find('/', at + 1)) {
      std::string parent = p.substr(0, at);
      if (seen.insert(parent).second) entries.push_back({parent, fs::EntryType::dir, 0, false, "", ""});
    }
    auto found = fs::scan_tree(root->get(), p, none, nullptr);
    if (!found) co_return co_await refuse(*stream, found.error());
    for (auto& e : *found) {
      if (e.type == fs::EntryType::link && !fs::symlink_stays_inside(e.path, e.target)) continue;
      if (seen.insert(e.path).second) entries.push_back(std::move(e));
    }
  }
  std::optional<fs::TopRename> rename;
  if (!rename_as.empty() && paths.size() == 1 && paths[0].find('/') == std::string::npos) {
    rename = fs::TopRename{rename_as, paths[0]};
    for (auto& e : entries) e.path = paths[0] == e.path ? rename_as : rename_as + e.path.substr(paths[0].size());
  }
  const fs::Progress no_progress;
  auto stats = co_await fs::send_tree(*stream, root->get(), entries, no_progress, rename);
  if (!stats) spdlog::info("session {}: send failed: {}", ctx.session_id, stats.error().what());
  (void)co_await stream->close_write();
}

std::vector<std::string> string_list(const nlohmann::json& j) {
  std::vector<std::string> out;
  if (!j.is_array()) return out;
  for (const auto& v : j)
    if (v.is_string()) out.push_back(v.get<std::string>());
  return out;
}

}  // namespace

asio::awaitable<void> serve_run(std::shared_ptr<MuxStream> stream, nlohmann::json args, ExecContext context) {
  const std::string mode = string_or(args, "mode");
  auto ws = workspace_path(context);
  if (mode == "sync" && ws) {
    const sfs::path dir = ws->parent_path();
    const std::string root_dest;
    co_return co_await run_sync(stream, context, dir, root_dest, true);
  }
  if (mode == "exec") co_return co_await run_exec(stream, context);
  if (mode == "attach") co_return co_await CommandLink::serve_attach(stream, args, context.consumer);
  if (mode == "pull") {
    const std::vector<std::string> paths = string_list(field_or(args, "paths", nullptr));
    const std::string no_rename;
    co_return co_await run_send(stream, context, paths, no_rename);
  }
  const Error why(errc::unsupported, "unknown run mode");
  co_await refuse(*stream, why);
}

asio::awaitable<void> serve_cp(std::shared_ptr<MuxStream> stream, nlohmann::json args, ExecContext context) {
  const std::string mode = string_or(args, "mode");
  auto ws = workspace_path(context);
  if (mode == "put" && ws) {
    const std::string dest = string_or(args, "dest");
    const sfs::path dir = ws->parent_path();
    co_return co_await run_sync(stream, context, dir, dest, false);
  }
  if (mode == "get") {
    std::vector<std::string> paths{string_or(args, "path")};
    std::string as = string_or(args, "as");
    if (!as.empty() && !fs::split_relative_path(as)) as.clear();
    if (as.find('/') != std::string::npos) as.clear();
    co_return co_await run_send(stream, context, paths, as);
  }
  const Error why(errc::unsupported, "unknown cp mode");
  co_await refuse(*stream, why);
}

}  // namespace runsnack::exec
