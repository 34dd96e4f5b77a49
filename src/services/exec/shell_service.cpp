#include "services/exec/shell_service.hpp"

#include "core/json_fields.hpp"
#include "core/paths.hpp"
#include "sandbox/child_process.hpp"
#include "sandbox/launch.hpp"
#include "sandbox/workspace_names.hpp"
#include "sandbox/workspace_projects.hpp"
#include "sandbox/sandbox.hpp"
#include "services/exec/service_replies.hpp"
#include "services/exec/usage_budget.hpp"
#include "fs/offload.hpp"
#include "fs/transfer.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <regex>

namespace runsnack::exec {

namespace asio = boost::asio;
namespace sfs = std::filesystem;
using namespace asio::experimental::awaitable_operators;

namespace {

constexpr int kMaxWindowSide = 10000;  // rows or columns; more is not a terminal

// What the input watcher and the output pump share about one shell.
struct ShellControl {
  pid_t outer = -1;  // the bwrap we forked
  fs::UniqueFd master;
  std::optional<Cgroup> cgroup;
  std::shared_ptr<asio::steady_timer> deadline;
  bool finished = false;
  bool consumer_gone = false;
  std::string reason;

  void kill_all(const std::string& why) {
    if (finished) return;
    if (reason.empty()) reason = why;
    if (outer > 0) ::kill(outer, SIGKILL);  // --die-with-parent takes the namespace with it
    if (cgroup) cgroup->kill_all();
  }
};

std::optional<winsize> window_from(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("rows") || !j.contains("cols") || !j["rows"].is_number_integer() ||
      !j["cols"].is_number_integer())
    return std::nullopt;
  const int rows = j["rows"].get<int>(), cols = j["cols"].get<int>();
  if (rows <= 0 || cols <= 0 || rows > kMaxWindowSide || cols > kMaxWindowSide) return std::nullopt;
  winsize ws{};
  ws.ws_row = static_cast<unsigned short>(rows);
  ws.ws_col = static_cast<unsigned short>(cols);
  return ws;
}

// Keystrokes and window sizes from the consumer into the pty; the end of the
// stream or session kills the shell.
asio::awaitable<void> feed_input(std::shared_ptr<MuxStream> stream, std::shared_ptr<ShellControl> ctl) {
  auto ex = co_await asio::this_coro::executor;
  asio::posix::stream_descriptor master(ex, ::dup(ctl->master.get()));
  for (;;) {
    auto f = co_await fs::read_frame(*stream);
    if (!f) {
      if (!ctl->finished) ctl->consumer_gone = true;
      ctl->kill_all("the consumer went away");
      co_return;
    }
    if (f->type == fs::FrameType::in) {
      std::size_t off = 0;
      while (off < f->payload.size() && !ctl->finished) {
        ssize_t n = ::write(master.native_handle(), f->payload.data() + off, f->payload.size() - off);
        if (n > 0) {
          off += static_cast<std::size_t>(n);
        } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
          (void)co_await master.async_wait(asio::posix::stream_descriptor::wait_write,
                                           asio::as_tuple(asio::use_awaitable));
        } else {
          break;  // the shell is gone: its exit is on its way
        }
      }
    } else if (f->type == fs::FrameType::control) {
      auto j = fs::decode_control(f->payload);
      if (!j || (*j)["type"] != "winsize") continue;
      if (auto ws = window_from(*j); ws && !ctl->finished) ::ioctl(master.native_handle(), TIOCSWINSZ, &*ws);
    }
  }
}

// The pty's output to the consumer until the shell and everything holding the pty are gone (EIO).
asio::awaitable<void> pump_pty(MuxStream& stream, std::shared_ptr<ShellControl> ctl) {
  auto ex = co_await asio::this_coro::executor;
  asio::posix::stream_descriptor master(ex, ::dup(ctl->master.get()));
  std::vector<std::uint8_t> buf(fs::kMaxDataBytes);
  auto tok = asio::as_tuple(asio::use_awaitable);
  bool send_ok = true;
  for (;;) {
    co_await master.async_wait(asio::posix::stream_descriptor::wait_read, tok);
    ssize_t n = ::read(master.native_handle(), buf.data(), buf.size());
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) co_return;  // EIO: no process holds the pty any more
    if (!send_ok) continue;
    const std::span<const std::uint8_t> chunk(buf.data(), static_cast<std::size_t>(n));
    if (!co_await fs::write_frame(stream, fs::FrameType::out, chunk)) send_ok = false;
  }
}

void audit(const ExecContext& ctx, const std::string& kind, const std::string& reason, nlohmann::json detail) {
  detail["mode"] = "shell";
  audit_event(ctx, kind, kind == "run_start" ? "accept" : "", reason, std::move(detail));
}

std::string shell_path() {
  std::error_code ec;
  return sfs::exists("/bin/bash", ec) ? "/bin/bash" : "/bin/sh";
}

}  // namespace

asio::awaitable<void> serve_shell(std::shared_ptr<MuxStream> stream, nlohmann::json args, ServiceContext session) {
  auto workspace = workspace_name_in(args);
  if (!workspace) co_return co_await refuse(*stream, workspace.error());
  ExecContext ctx{std::move(session), *workspace};
  const RunTerms terms = RunTerms::from_json(field_or(ctx.grant.terms, "run"));
  winsize winsz{};
  winsz.ws_row = 24;
  winsz.ws_col = 80;
  if (auto w = window_from(args)) winsz = *w;
  std::string term = "xterm-256color";
  static const std::regex term_re("[A-Za-z0-9._+-]{1,64}");
  if (args.is_object() && args.contains("term") && args["term"].is_string() &&
      std::regex_match(args["term"].get<std::string>(), term_re))
    term = args["term"].get<std::string>();

  const std::vector<int> gpus = allowed_gpus(ctx.grant);
  auto budget = std::make_shared<UsageBudget>(ctx.grant, terms, gpus.size());
  if (auto why = budget->spent(0, 0)) {
    const Error spent(errc::exhausted, *why);
    co_return co_await refuse(*stream, spent);
  }

  auto ws = co_await fs::offload([&] { return prepare_workspace(ctx.consumer, ctx.grant.id, ctx.workspace, terms); });
  if (!ws) co_return co_await refuse(*stream, ws.error());

  int master_fd = -1, slave_fd = -1;
  if (::openpty(&master_fd, &slave_fd, nullptr, nullptr, &winsz) != 0) {
    const Error why(errc::io_error, "openpty");
    co_return co_await refuse(*stream, why);
  }
  auto ctl = std::make_shared<ShellControl>();
  ctl->master = fs::UniqueFd(master_fd);
  fs::UniqueFd slave(slave_fd);
  ::fcntl(master_fd, F_SETFD, FD_CLOEXEC);
  ::fcntl(slave_fd, F_SETFD, FD_CLOEXEC);
  ::fcntl(master_fd, F_SETFL, ::fcntl(master_fd, F_GETFL) | O_NONBLOCK);
  // The pty belongs to the shell's user (a root provider's sandbox uid), as a login's does.
  if (ws->user.switched) ::fchown(slave_fd, ws->user.uid, ws->user.gid);

  static std::atomic<std::uint64_t> counter{0};
  LaunchRequest launch;
  launch.spec.workspace = ws->path;
  launch.spec.argv = {shell_path(), "-l"};
  launch.spec.env = {{"TERM", term}};
  launch.spec.gpus = gpus;
  launch.spec.own_pty = true;
  if (auto sd = state_dir()) launch.spec.hidden.push_back(*sd);
  if (const char* home = std::getenv("HOME")) launch.spec.hidden.emplace_back(home);
  launch.terms = terms;
  launch.cgroup_name = "runsnack-shell-" + ctx.session_id + "-" + std::to_string(++counter);
  launch.user = ws->user;
  launch.ns_holder = ws->ns_holder;
  launch.pty_slave = slave.get();
  if (ws->quota_mode == "polling") launch.file_size_limit = ws->quota_bytes;
  const std::string command_line = launch.spec.argv[0] + " -l (shell)";
  const WorkspaceUses::Use in_use = WorkspaceUses::begin(ws->path);  // until the shell ends
  auto launched = launch_sandboxed(std::move(launch));
  slave = fs::UniqueFd();  // only the sandbox holds the pty now: its end is EIO on the master
  if (!launched) co_return co_await refuse(*stream, launched.error());
  ChildProcess* child = &*launched->child;
  ctl->outer = child->pid();
  if (launched->cgroup) ctl->cgroup.emplace(std::move(*launched->cgroup));
  auto record = record_command(ctx.record_command, {command_line, ctl->outer, ctl->cgroup ? ctl->cgroup->usage_dir().string() : ""});

  nlohmann::json limits = launched->limits;
  limits["disk_quota_enforced_by"] = ws->quota_mode;
  audit(ctx, "run_start", "", {{"command", command_line}, {"limits", limits}});
  const nlohmann::json started = {{"type", "started"}, {"limits", limits}};
  (void)co_await fs::write_control(*stream, started);

  // Named first: GCC 12 mishandles temporaries in an expression that also co_awaits.
  const auto executor = co_await asio::this_coro::executor;
  asio::co_spawn(executor, feed_input(stream, ctl), asio::detached);
  std::function<void(const std::string&)> stop = [ctl](const std::string& why) { ctl->kill_all(why); };
  auto budget_done = watch_budget(executor, budget, ctl->outer, stop);
  auto start = std::chrono::steady_clock::now();
  if (terms.timeout_s) {
    ctl->deadline = std::make_shared<asio::steady_timer>(
        executor, start + std::chrono::milliseconds(static_cast<std::int64_t>(*terms.timeout_s * 1000)));
    asio::co_spawn(executor, enforce_deadline(stream, ctl, time_limit_text(*terms.timeout_s)), asio::detached);
  }
  co_await pump_pty(*stream, ctl);
  ExitInfo exit = co_await child->wait();
  ctl->finished = true;
  record.reset();
  if (ctl->deadline) ctl->deadline->cancel();
  std::optional<std::uint64_t> peak = ctl->cgroup ? ctl->cgroup->peak_memory() : std::nullopt;
  // A limit of its cgroup stopped the shell (issue 39, item 4); a process in it that hit one was
  // already seen by the user at the prompt.
  if (ctl->cgroup && ctl->reason.empty() && (exit.signal || exit.status != 0)) {
    const auto hit = ctl->cgroup->limits_hit();
    ctl->reason = limit_hit_text(hit.memory, hit.processes, true, limits);
  }
  ctl->cgroup.reset();  // kills any straggler, removes the group
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  *budget_done = true;
  budget->record(exit.cpu_user_s + exit.cpu_sys_s, seconds);
  const nlohmann::json signal = exit.signal ? nlohmann::json(*exit.signal) : nlohmann::json(nullptr);
  audit(ctx, "run_end", ctl->reason,
        {{"command", command_line}, {"exit_status", exit.status}, {"signal", signal}, {"seconds", seconds},
         {"cpu_user_s", exit.cpu_user_s}, {"cpu_sys_s", exit.cpu_sys_s},
         {"peak_memory_bytes", peak.value_or(exit.max_rss_bytes)}});
  if (ctl->consumer_gone) co_return;
  const nlohmann::json done = {{"type", "exit"}, {"status", exit.status}, {"signal", signal},
                               {"reason", ctl->reason}, {"seconds", seconds}};
  (void)co_await fs::write_control(*stream, done);
  (void)co_await stream->close_write();
}

}  // namespace runsnack::exec
