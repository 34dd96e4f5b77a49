#include "services/exec/exec_service.hpp"

#include "core/json_fields.hpp"
#include "core/paths.hpp"
#include "sandbox/cgroup.hpp"
#include "sandbox/command_lookup.hpp"
#include "sandbox/child_process.hpp"
#include "services/exec/detached_commands.hpp"
#include "sandbox/launch.hpp"
#include "sandbox/run_terms.hpp"
#include "sandbox/sandbox.hpp"
#include "services/exec/service_replies.hpp"
#include "services/exec/stdin_relay.hpp"
#include "services/exec/usage_budget.hpp"
#include "sandbox/workspace_image.hpp"
#include "sandbox/workspace_names.hpp"
#include "sandbox/workspace_projects.hpp"
#include "services/exec/workspace_changes.hpp"
#include "services/exec/workspace_service.hpp"
#include "services/exec/workspace_transfer.hpp"
#include "store/session_store.hpp"
#include "fs/offload.hpp"
#include "fs/path_rules.hpp"
#include "fs/transfer.hpp"

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

void audit(const ExecContext& ctx, const std::string& kind, const std::string& decision, const std::string& reason,
           nlohmann::json detail) {
  audit_event(ctx, kind, decision, reason, std::move(detail));
}

struct ExecRequest {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::optional<std::vector<int>> gpus;
  std::optional<double> timeout_s;
  bool stdin_pipe = false;  // the consumer sends stdin (stdin_relay.hpp); else /dev/null
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
  r.stdin_pipe = bool_or(j, "stdin", false);
  return r;
}

// What the control watcher, the deadline and the output pump share about one running command.
struct RunControl {
  pid_t outer = -1;       // the bwrap we forked
  pid_t inner = -1;       // bwrap's pid-namespace init, whose process group holds the command
  fs::UniqueFd info;      // read end of bwrap --info-fd
  std::optional<Cgroup> cgroup;
  std::shared_ptr<asio::steady_timer> deadline;  // the time limit, then the output's grace
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

// Reads the consumer's frames while the command runs: signals, stdin (to `input`, when the
// command takes it: never waited on here, so a signal behind unread input is seen at once), and
// the end of the stream or session, which kills the command (once the link has given up waiting
// for a re-attach, detached_commands.hpp).
asio::awaitable<void> watch_control(std::shared_ptr<CommandLink> link, std::shared_ptr<RunControl> ctl,
                                    std::shared_ptr<StdinRelay> input) {
  for (;;) {
    auto f = co_await link->read_frame();
    if (!f) {
      if (!ctl->finished) ctl->consumer_gone = true;
      ctl->kill_all("the consumer went away");
      if (input) input->stop();
      co_return;
    }
    if (f->type == fs::FrameType::in) {
      if (input) input->take(std::move(f->payload));
      continue;
    }
    if (f->type != fs::FrameType::control) continue;
    auto j = fs::decode_control(f->payload);
    if (!j) continue;
    if ((*j)["type"] == "stdin_end") {
      if (input) input->end();
      continue;
    }
    if ((*j)["type"] != "signal" || !(*j)["signal"].is_number_integer()) continue;
    int sig = (*j)["signal"].get<int>();
    if (sig == SIGINT) ctl->interrupt();
    else if (sig == SIGKILL) ctl->kill_all("killed by the consumer (second Ctrl-C)");
  }
}

// Where no image bounds the workspace: measured every kQuotaPoll while the command runs.
asio::awaitable<void> poll_quota(std::shared_ptr<RunControl> ctl, sfs::path workspace, std::uint64_t quota) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (!ctl->finished) {
    timer.expires_after(kQuotaPoll);
    (void)co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ctl->finished) co_return;
    const std::uint64_t used = co_await fs::offload([&] { return allocated_bytes(workspace); });
    if (used > quota) {
      ctl->kill_all(quota_full_text(quota));
      co_return;
    }
  }
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Streams the command's stdout/stderr as frames until both pipes close. When the link fails
// (the consumer left for good, or the deadline's grace reset the stream), output is read and dropped.
asio::awaitable<void> pump_output(CommandLink& link, fs::UniqueFd out_fd, fs::UniqueFd err_fd) {
  auto ex = co_await asio::this_coro::executor;
  set_nonblocking(out_fd.get());
  set_nonblocking(err_fd.get());
  asio::posix::stream_descriptor out(ex, out_fd.release()), err(ex, err_fd.release());
  bool out_open = true, err_open = true, send_ok = true;
  std::vector<std::uint8_t> buf(fs::kMaxDataBytes);
  auto rd = asio::posix::stream_descriptor::wait_read;
  auto tok = asio::as_tuple(asio::use_awaitable);
  while (out_open || err_open) {
    if (out_open && err_open) co_await (out.async_wait(rd, tok) || err.async_wait(rd, tok));
    else if (out_open) co_await out.async_wait(rd, tok);
    else co_await err.async_wait(rd, tok);
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

  auto ws = co_await fs::offload([&] { return prepare_workspace(ctx.consumer, ctx.grant.id, ctx.workspace, terms); });
  if (!ws) {
    audit(ctx, "run_start", "refuse", ws.error().what(), nlohmann::json::object());
    co_return co_await refuse(*stream, ws.error());
  }

  std::vector<std::filesystem::path> hidden;
  if (auto sd = state_dir()) hidden.push_back(*sd);
  if (const char* home = std::getenv("HOME")) hidden.emplace_back(home);
  // A command that is not there ends as a shell's would (127, 126), with one line, not bwrap's error.
  const std::string path_env = req->env.contains("PATH") ? req->env.at("PATH") : std::string(kSandboxPath);
  const std::string command = req->argv.front();
  const int missing = lookup_exit_status(
      co_await fs::offload([&] { return lookup_command(command, ws->path, path_env, hidden); }));
  if (missing != 0) {
    std::string message = command.substr(0, 200) + (missing == 127 ? ": command not found on the provider"
                                                                   : ": not executable on the provider (a folder, or no x permission)");
    audit(ctx, "run_start", "refuse", message, nlohmann::json::object());
    const nlohmann::json done = {{"type", "exit"}, {"status", missing}, {"signal", nullptr}, {"reason", ""},
                                 {"message", message}, {"seconds", 0}};
    if (co_await fs::write_control(*stream, done)) (void)co_await stream->close_write();
    co_return;
  }

  static std::atomic<std::uint64_t> counter{0};
  LaunchRequest launch;
  launch.spec.workspace = ws->path;
  launch.spec.argv = req->argv;
  launch.spec.env = req->env;
  launch.spec.gpus = gpus;
  launch.spec.hidden = hidden;
  launch.terms = terms;
  launch.cgroup_name = "runsnack-" + ctx.session_id + "-" + std::to_string(++counter);
  launch.user = ws->user;
  launch.ns_holder = ws->ns_holder;
  launch.want_info = true;
  launch.stdin_pipe = req->stdin_pipe;
  if (ws->quota_mode == "polling") launch.file_size_limit = ws->quota_bytes;
  const WorkspaceUses::Use in_use = WorkspaceUses::begin(ws->path);  // until the command ends
  const timespec launched_at = change_clock_now();  // what changes after this, the command did
  auto launched = launch_sandboxed(std::move(launch));
  if (!launched) {
    audit(ctx, "run_start", "refuse", launched.error().what(), nlohmann::json::object());
    co_return co_await refuse(*stream, launched.error());
  }
  ChildProcess& child = *launched->child;
  auto ctl = std::make_shared<RunControl>();
  ctl->outer = child.pid();
  ctl->info = std::move(launched->info);
  if (launched->cgroup) ctl->cgroup.emplace(std::move(*launched->cgroup));
  auto record = record_command(ctx.record_command, {short_command_line(req->argv), ctl->outer,
                                            ctl->cgroup ? ctl->cgroup->usage_dir().string() : ""});

  std::string command_line;
  for (const auto& a : req->argv) command_line += (command_line.empty() ? "" : " ") + a;
  nlohmann::json limits = launched->limits;
  limits["disk_quota_enforced_by"] = ws->quota_mode;
  audit(ctx, "run_start", "accept", "", {{"command", command_line.substr(0, 1000)}, {"limits", limits}});
  auto link = CommandLink::create(stream, ctx.consumer);
  nlohmann::json started = {{"type", "started"}, {"limits", limits}};
  if (!link->token().empty()) started["token"] = link->token();
  if (record)
    link->on_attach([weak = std::weak_ptr(record)](const std::string& s) {
      if (auto r = weak.lock(); r && !s.empty()) r->moved_to(s);
    });
  (void)co_await link->write_control(started);

  // Named first: GCC 12 mishandles temporaries in an expression that also co_awaits.
  const auto executor = co_await asio::this_coro::executor;
  std::shared_ptr<StdinRelay> input;
  if (fs::UniqueFd in = child.take_stdin()) {
    input = StdinRelay::create(executor, std::move(in));
    link->on_attach([weak = std::weak_ptr(input)](const std::string&) {
      if (auto relay = weak.lock()) relay->end_for_reattach();  // input does not follow a re-attach
    });
    asio::co_spawn(executor, input->run(link), asio::detached);
  }
  asio::co_spawn(executor, watch_control(link, ctl, input), asio::detached);
  std::function<void(const std::string&)> stop = [ctl](const std::string& why) { ctl->kill_all(why); };
  auto budget_done = watch_budget(executor, budget, ctl->outer, stop);

  std::optional<double> timeout = terms.timeout_s;
  if (req->timeout_s && (!timeout || *req->timeout_s < *timeout)) timeout = req->timeout_s;
  auto start = std::chrono::steady_clock::now();
  if (timeout) {
    ctl->deadline = std::make_shared<asio::steady_timer>(
        executor, start + std::chrono::milliseconds(static_cast<std::int64_t>(*timeout * 1000)));
    asio::co_spawn(executor, enforce_deadline(stream, ctl, time_limit_text(*timeout)), asio::detached);
  }
  if (ws->quota_mode == "polling")
    asio::co_spawn(executor, poll_quota(ctl, ws->quota_dir, *ws->quota_bytes), asio::detached);
  co_await pump_output(*link, child.take_stdout(), child.take_stderr());
  ExitInfo exit = co_await child.wait();
  ctl->finished = true;
  if (input) input->stop();
  record.reset();
  if (ctl->deadline) ctl->deadline->cancel();
  std::optional<std::uint64_t> peak = ctl->cgroup ? ctl->cgroup->peak_memory() : std::nullopt;
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  *budget_done = true;
  budget->record(exit.cpu_user_s + exit.cpu_sys_s, seconds);
  // A full workspace is worth saying even when the command carried on past its write errors.
  std::string notice;
  if (ws->quota_bytes) notice = co_await fs::offload([&] { return quota_notice(*ws); });
  // A limit of its cgroup stopped it, or a process in it: said as the time limit is (issue 39, item 4).
  if (ctl->cgroup) {
    const auto hit = ctl->cgroup->limits_hit();
    const bool badly = exit.signal.has_value() || exit.status != 0;
    std::string said = limit_hit_text(hit.memory, hit.processes, badly, limits);
    if (!said.empty() && badly && ctl->reason.empty()) ctl->reason = std::move(said);
    else if (!said.empty() && notice.empty()) notice = std::move(said);
  }
  // What it left changed stays here unless the consumer pulls it: its `run` says so.
  WorkspaceChanges changed;
  if (!ctl->consumer_gone)
    changed = co_await fs::offload(stream->peer_name(), [&] { return changes_since(ws->path, launched_at); });

  nlohmann::json detail = {{"command", command_line.substr(0, 1000)},
                           {"exit_status", exit.status},
                           {"signal", exit.signal ? nlohmann::json(*exit.signal) : nlohmann::json(nullptr)},
                           {"seconds", seconds},
                           {"cpu_user_s", exit.cpu_user_s},
                           {"cpu_sys_s", exit.cpu_sys_s},
                           {"peak_memory_bytes", peak.value_or(exit.max_rss_bytes)}};
  if (!notice.empty()) detail["notice"] = notice;
  audit(ctx, "run_end", "", ctl->reason.empty() ? notice : ctl->reason, detail);
  if (!ctl->consumer_gone) {
    nlohmann::json done = {{"type", "exit"}, {"status", exit.status},
                           {"signal", exit.signal ? nlohmann::json(*exit.signal) : nlohmann::json(nullptr)},
                           {"reason", ctl->reason}, {"seconds", seconds}, {"changed", to_json(changed)}};
    if (!notice.empty() && notice != ctl->reason) done["notice"] = notice;
    (void)co_await link->write_control(done);
  }
  // After the answer, which need not wait for it: the pid namespace died with its init, so
  // nothing of the command runs any more; this kills any straggler and removes the group.
  ctl->cgroup.reset();
  if (!ctl->consumer_gone) co_await link->close_write();
}

std::vector<std::string> string_list(const nlohmann::json& j) {
  std::vector<std::string> out;
  if (!j.is_array()) return out;
  for (const auto& v : j)
    if (v.is_string()) out.push_back(v.get<std::string>());
  return out;
}

}  // namespace

asio::awaitable<void> serve_run(std::shared_ptr<MuxStream> stream, nlohmann::json args, ServiceContext session) {
  const std::string mode = string_or(args, "mode");
  auto workspace = workspace_name_in(args);
  if (!workspace) co_return co_await refuse(*stream, workspace.error());
  ExecContext context{std::move(session), *workspace};
  if (mode == "sync") co_return co_await serve_sync(stream, context, std::string(), true);
  if (mode == "exec") co_return co_await run_exec(stream, context);
  if (mode == "attach") co_return co_await CommandLink::serve_attach(stream, args, context.consumer, context.session_id);
  if (mode == "workspaces" || mode == "remove") co_return co_await serve_workspaces(stream, context, args);
  if (mode == "pull") {
    SendRequest req{string_list(field_or(args, "paths", nullptr)), std::string(), false, "pull"};
    co_return co_await serve_send(stream, context, std::move(req));
  }
  const Error why(errc::unsupported, "unknown run mode");
  co_await refuse(*stream, why);
}

asio::awaitable<void> serve_cp(std::shared_ptr<MuxStream> stream, nlohmann::json args, ServiceContext session) {
  const std::string mode = string_or(args, "mode");
  auto workspace = workspace_name_in(args);
  if (!workspace) co_return co_await refuse(*stream, workspace.error());
  ExecContext context{std::move(session), *workspace};
  if (mode == "put") co_return co_await serve_sync(stream, context, string_or(args, "dest"), false);
  if (mode == "stat") co_return co_await serve_stat(stream, context, string_or(args, "path"));
  if (mode == "workspaces" || mode == "remove") co_return co_await serve_workspaces(stream, context, args);
  if (mode == "get") {
    SendRequest req{{string_or(args, "path")}, string_or(args, "as"), bool_or(args, "folder", false), "cp_get"};
    // A name for the top entry only: one component, or the path's own last one.
    if (!req.rename_as.empty() && (!fs::split_relative_path(req.rename_as) || req.rename_as.find('/') != std::string::npos))
      req.rename_as.clear();
    co_return co_await serve_send(stream, context, std::move(req));
  }
  const Error why(errc::unsupported, "unknown cp mode");
  co_await refuse(*stream, why);
}

}  // namespace runsnack::exec
