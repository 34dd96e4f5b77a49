#include "services/cuda/cuda_service.hpp"

#include "core/json_fields.hpp"
#include "core/paths.hpp"
#include "services/common/pump.hpp"
#include "services/cuda/server_env.hpp"
#include "sandbox/child_process.hpp"
#include "sandbox/launch.hpp"
#include "sandbox/run_terms.hpp"
#include "session/stream_header.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>

extern char** environ;

namespace runsnack::cuda {

namespace asio = boost::asio;
namespace sfs = std::filesystem;
using asio::local::stream_protocol;

namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
// Of each server's stdout/stderr (its own diagnostics), this much reaches the provider's log.
constexpr std::size_t kMaxLoggedOutput = 64 * 1024;

// Where the shim may be, so that the server's library path never names it:
// RUNSNACK_CUDA_LIBDIR when set (other places are folders named cuda-shim,
// which server_env.hpp drops by name).
std::optional<sfs::path> configured_shim_dir() {
  const char* dir = std::getenv("RUNSNACK_CUDA_LIBDIR");
  if (!dir || !*dir) return std::nullopt;
  return sfs::path(dir);
}

asio::awaitable<void> refuse(MuxStream& stream, errc code, const std::string& reason) {
  const nlohmann::json reply = to_json(StreamReply{false, code, reason});
  if (co_await write_stream_message(stream, reply)) (void)co_await stream.close_write();
}

// Copies one of the server's output pipes to the provider's log, line by
// line, up to kMaxLoggedOutput; drains the rest so that the server never
// blocks on a full pipe.
asio::awaitable<void> log_output(fs::UniqueFd fd, pid_t pid, std::string which) {
  ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) | O_NONBLOCK);
  asio::posix::stream_descriptor pipe(co_await asio::this_coro::executor, fd.release());
  std::string pending;
  std::size_t logged = 0;
  char buf[4096];
  for (;;) {
    auto [ec, n] = co_await pipe.async_read_some(asio::buffer(buf), kTuple);
    if (ec) break;
    if (logged >= kMaxLoggedOutput) continue;
    pending.append(buf, n);
    for (std::size_t nl; (nl = pending.find('\n')) != std::string::npos && logged < kMaxLoggedOutput;) {
      spdlog::info("cuda-server {} {}: {}", pid, which, pending.substr(0, nl));
      logged += nl + 1;
      pending.erase(0, nl + 1);
    }
    if (pending.size() > 4096) pending.clear();  // a line without end: not worth keeping
  }
  if (!pending.empty() && logged < kMaxLoggedOutput) spdlog::info("cuda-server {} {}: {}", pid, which, pending);
}

// Kills the server when `timer` expires (the wall-clock limit, or the grace
// after its input ended); cancelling the timer stands it down. The kill is a
// no-op once the server has been reaped.
asio::awaitable<void> kill_at(std::shared_ptr<asio::steady_timer> timer, std::shared_ptr<exec::ChildProcess> child,
                              std::shared_ptr<std::string> reason, std::string why) {
  auto [ec] = co_await timer->async_wait(kTuple);
  if (ec) co_return;
  if (reason->empty()) *reason = why;
  child->kill(SIGKILL);
}

struct Started {
  std::shared_ptr<exec::ChildProcess> child;
  std::optional<exec::Cgroup> cgroup;
  fs::UniqueFd socket;
  nlohmann::json limits;
};

// The server runs in the consumers' sandbox (sandbox/sandbox.hpp): its own unprivileged uid, no
// capabilities, the seccomp filter, no network, no workspace and no state folder, only the
// grant's /dev/nvidia* nodes; this binary is bound in read-only and runs as `cuda-server`.
Result<Started> start_server(const ServiceContext& ctx, const exec::RunTerms& terms) {
  static std::atomic<std::uint64_t> counter{0};
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
    return fail(errc::io_error, "cannot make a socket pair for the CUDA server");
  fs::UniqueFd ours(pair[0]), theirs(pair[1]);
  widen_socket_buffers(ours.get());
  widen_socket_buffers(theirs.get());

  std::vector<std::string> env_in;
  for (char** e = environ; e && *e; ++e) env_in.emplace_back(*e);
  std::optional<std::vector<int>> gpus;
  if (!ctx.grant.gpus.empty()) gpus = exec::allowed_gpus(ctx.grant);
  exec::LaunchRequest launch;
  launch.spec.argv = {exec::kSelfMount, "cuda-server", "--fd", "3"};
  for (const auto& kv : sandboxed_server_environment(server_environment(env_in, configured_shim_dir(), gpus))) {
    const auto eq = kv.find('=');
    launch.spec.env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  launch.spec.gpus = exec::allowed_gpus(ctx.grant);
  if (auto sd = state_dir()) launch.spec.hidden.push_back(*sd);
  if (const char* home = std::getenv("HOME")) launch.spec.hidden.emplace_back(home);
  launch.terms = terms;
  launch.terms.network = false;  // it speaks only on its socket
  launch.cgroup_name = "runsnack-cuda-" + ctx.session_id + "-" + std::to_string(++counter);
  launch.user = exec::sandbox_user(ctx.consumer.str());
  launch.pass_fd = theirs.get();
  launch.bind_self = true;
  // The driver reserves far more address space than it uses: an RLIMIT_AS would stop cuInit.
  // Memory is bounded only where a cgroup is in force.
  launch.limit_address_space = false;
  auto launched = exec::launch_sandboxed(std::move(launch));
  if (!launched) return fail(errc::io_error, "cannot start the CUDA server: " + launched.error().what());
  return Started{std::make_shared<exec::ChildProcess>(std::move(*launched->child)), std::move(launched->cgroup),
                 std::move(ours), std::move(launched->limits)};
}

}  // namespace

asio::awaitable<void> serve_cuda_stream(std::shared_ptr<SessionLimiter> limiter, std::shared_ptr<MuxStream> stream,
                                        nlohmann::json args, ServiceContext context) {
  auto audit = [&](const std::string& kind, const std::string& decision, const std::string& reason,
                   nlohmann::json detail) {
    detail["session"] = context.session_id;
    if (context.audit) context.audit(kind, decision, reason, detail);
  };
  if (args.is_object() && bool_or(args, "check", false)) {
    const nlohmann::json reply = {{"ok", true}, {"cuda", cuda_availability()}};
    if (co_await write_stream_message(*stream, reply)) (void)co_await stream->close_write();
    co_return;
  }

  // Counts this server for as long as it lives.
  auto slot = limiter->acquire(context.session_id, kMaxServersPerSession, context.grant.bandwidth_bytes_per_s);
  if (!slot) {
    const std::string reason = "too many CUDA processes at once on this session (at most " +
                               std::to_string(kMaxServersPerSession) + ")";
    audit("cuda_start", "refuse", reason, nlohmann::json::object());
    co_await refuse(*stream, errc::exhausted, reason);
    co_return;
  }
  PumpOptions pump_options;
  pump_options.mode = PumpMode::socket_leads;
  pump_options.buffer_bytes = kPumpBytes;
  pump_options.bucket = slot->bucket();

  const exec::RunTerms terms = exec::RunTerms::from_json(field_or(context.grant.terms, "run"));
  auto started = start_server(context, terms);
  if (!started) {
    const std::string reason = started.error().what();
    audit("cuda_start", "refuse", reason, nlohmann::json::object());
    co_await refuse(*stream, errc::io_error, reason);
    co_return;
  }
  auto child = started->child;
  const pid_t pid = child->pid();
  auto record = record_command(context.record_command, {"cuda-server (runsnack cuda)", pid,
                                                      started->cgroup ? started->cgroup->usage_dir().string() : ""});
  const std::string backend = cuda_host_backend() ? "host" : "driver";
  nlohmann::json limits = started->limits;
  audit("cuda_start", "accept", "", {{"pid", pid}, {"backend", backend}, {"limits", limits}});
  spdlog::info("session {}: cuda-server {} started ({})", context.session_id, pid, backend);

  auto ex = co_await asio::this_coro::executor;
  asio::co_spawn(ex, log_output(child->take_stdout(), pid, "stdout"), asio::detached);
  asio::co_spawn(ex, log_output(child->take_stderr(), pid, "stderr"), asio::detached);
  auto reason = std::make_shared<std::string>();
  auto deadline = std::make_shared<asio::steady_timer>(ex, asio::steady_timer::time_point::max());
  if (terms.timeout_s) {
    deadline->expires_after(std::chrono::milliseconds(static_cast<std::int64_t>(*terms.timeout_s * 1000)));
    asio::co_spawn(ex, kill_at(deadline, child, reason, exec::time_limit_text(*terms.timeout_s)), asio::detached);
  }

  // The consumer's FIN is the server's EOF: from then on it has kServerExitGrace to exit.
  auto grace = std::make_shared<std::shared_ptr<asio::steady_timer>>();
  auto arm_grace = [ex, grace, child, reason] {
    if (*grace) return;
    *grace = std::make_shared<asio::steady_timer>(ex, kServerExitGrace);
    asio::co_spawn(ex, kill_at(*grace, child, reason, "did not exit after its input ended"), asio::detached);
  };
  pump_options.on_stream_fin = arm_grace;

  stream_protocol::socket socket(ex, stream_protocol(), started->socket.release());
  const auto begun = std::chrono::steady_clock::now();
  const nlohmann::json ok = {{"ok", true}, {"pid", pid}, {"backend", backend}};
  auto greeted = co_await write_stream_message(*stream, ok);
  if (!greeted) stream->reset();  // the pump then ends at once, as for a consumer that left
  PumpResult relayed = co_await pump(socket, *stream, pump_options);
  deadline->cancel();
  boost::system::error_code ignored;
  socket.close(ignored);
  // A lost consumer: kill now. Otherwise the server closed its end (it quit,
  // or its input ended): let it finish, briefly.
  if (relayed.stream_failed) {
    if (reason->empty()) *reason = "the consumer went away (" + relayed.error.value_or("stream closed") + ")";
    child->kill(SIGKILL);
  } else {
    arm_grace();
  }
  const exec::ExitInfo ended = co_await child->wait();
  record.reset();
  if (*grace) (*grace)->cancel();
  std::optional<std::uint64_t> peak = started->cgroup ? started->cgroup->peak_memory() : std::nullopt;
  started->cgroup.reset();  // kills any straggler, removes the group
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begun).count();
  if (reason->empty() && relayed.error) *reason = *relayed.error;
  spdlog::info("session {}: cuda-server {} ended, status {}{}", context.session_id, pid, ended.status,
               reason->empty() ? "" : " (" + *reason + ")");
  audit("cuda_end", "", *reason,
        {{"pid", pid},
         {"exit_status", ended.status},
         {"signal", ended.signal ? nlohmann::json(*ended.signal) : nlohmann::json(nullptr)},
         {"seconds", seconds},
         {"bytes_to_server", relayed.stream_to_socket},
         {"bytes_from_server", relayed.socket_to_stream},
         {"cpu_user_s", ended.cpu_user_s},
         {"cpu_sys_s", ended.cpu_sys_s},
         {"peak_memory_bytes", peak.value_or(ended.max_rss_bytes)}});
}

asio::awaitable<Result<nlohmann::json>> check_cuda(Session& session) {
  const StreamHeader header{kServiceCuda, {{"check", true}}};
  auto stream = co_await session.open(header);
  if (!stream) co_return stream.error();
  auto msg = co_await read_stream_message(**stream);
  if (!msg) co_return msg.error();
  if (!msg->is_object() || !bool_or(*msg, "ok", false) || !(*msg)["cuda"].is_object()) {
    auto reply = parse_stream_reply(*msg);
    co_return fail(errc::refused, reply ? reply->reason : std::string("the provider's answer did not parse"));
  }
  co_return (*msg)["cuda"];
}

asio::awaitable<Result<std::shared_ptr<MuxStream>>> open_cuda(Session& session) {
  const StreamHeader header{kServiceCuda, nlohmann::json::object()};
  co_return co_await session.open_pipelined(header);
}

}  // namespace runsnack::cuda
