#include "pool/exec_task.hpp"

#include "pool/wire.hpp"
#include "sandbox/launch.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>

#include <fstream>
#include <sstream>

namespace runsnack::pool {

namespace asio = boost::asio;
namespace fs = std::filesystem;

std::vector<std::string> substitute_shard(const std::vector<std::string>& argv, std::int64_t shard, std::int64_t shards) {
  std::vector<std::string> out;
  for (auto a : argv) {
    for (auto [key, value] : {std::pair<std::string, std::string>{"{shards}", std::to_string(shards)},
                              {"{shard}", std::to_string(shard)}}) {
      std::size_t pos = 0;
      while ((pos = a.find(key, pos)) != std::string::npos) {
        a.replace(pos, key.size(), value);
        pos += value.size();
      }
    }
    out.push_back(std::move(a));
  }
  return out;
}

namespace {

Result<std::string> read_bounded(const fs::path& p, std::size_t limit, const char* what) {
  std::error_code ec;
  auto size = fs::file_size(p, ec);
  if (ec) return std::string();
  if (size > limit) return fail(errc::too_large, std::string(what) + " is over " + std::to_string(limit) + " bytes");
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<nlohmann::json> collect_out(const fs::path& out_dir) {
  nlohmann::json files = nlohmann::json::array();
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(out_dir, ec))) return files;
  std::size_t total = 0;
  for (auto it = fs::recursive_directory_iterator(out_dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    auto st = it->symlink_status(ec);
    if (ec || !fs::is_regular_file(st)) continue;  // links and devices are not results
    auto size = it->file_size(ec);
    if (ec) continue;
    total += size;
    if (total > kMaxOutFilesBytes) return fail(errc::too_large, "files under out/ are over the limit");
    auto data = read_bounded(it->path(), kMaxOutFilesBytes, "an output file");
    if (!data) return data.error();
    files.push_back({{"path", fs::relative(it->path(), out_dir).string()}, {"data", base64_encode(*data)}});
  }
  return files;
}

}  // namespace

namespace {

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Reads what is there, keeping the first `keep` bytes; false once the pipe is closed.
bool drain(int fd, std::string& into, std::size_t keep, bool& over) {
  char buf[65536];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) return false;
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    if (into.size() + static_cast<std::size_t>(n) > keep) over = true;
    into.append(buf, std::min(static_cast<std::size_t>(n), keep - std::min(keep, into.size())));
  }
}

// The same, keeping the last `keep` bytes (a failed command's stderr ends with why).
bool drain_tail(int fd, std::string& into, std::size_t keep) {
  char buf[65536];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) return false;
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    into.append(buf, static_cast<std::size_t>(n));
    if (into.size() > keep) into.erase(0, into.size() - keep);
  }
}

}  // namespace

asio::awaitable<Result<TaskOutput>> run_exec_task(ExecTaskRequest req, std::function<asio::awaitable<bool>()> tick) {
  using namespace asio::experimental::awaitable_operators;
  std::error_code ec;
  fs::path ws = req.task_dir / "workspace";
  fs::create_directories(ws, ec);
  if (ec) co_return fail(errc::io_error, "cannot create " + ws.string() + ": " + ec.message());
  if (fs::is_directory(req.input_dir, ec)) {
    fs::copy(req.input_dir, ws, fs::copy_options::recursive, ec);
    if (ec) co_return fail(errc::io_error, "cannot copy the inputs: " + ec.message());
  }
  fs::create_directories(ws / "out", ec);

  exec::RunTerms terms;
  terms.memory_bytes = req.limits.memory_bytes;
  terms.max_procs = req.limits.max_procs;
  static std::atomic<std::uint64_t> counter{0};
  // The consumers' sandbox: a uid of the task's own (when the worker is root), no capabilities, seccomp.
  exec::LaunchRequest launch;
  launch.spec.workspace = ws;
  launch.spec.argv = req.argv;
  launch.spec.env = {{"RUNSNACK_SHARD", std::to_string(req.shard)}, {"RUNSNACK_SHARDS", std::to_string(req.shards)}};
  launch.spec.gpus = req.limits.gpus;
  launch.spec.hidden = req.hidden;
  launch.terms = terms;
  launch.cgroup_name = "runsnack-pool-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
  launch.user = exec::sandbox_user(req.task_dir.string());
  if (auto owned = exec::ensure_owned(ws, launch.user); !owned) co_return owned.error();
  auto launched = exec::launch_sandboxed(std::move(launch));
  if (!launched) co_return launched.error();
  auto& child = launched->child;
  auto& cgroup = launched->cgroup;

  auto ex = co_await asio::this_coro::executor;
  auto out_fd = child->take_stdout();
  auto err_fd = child->take_stderr();
  set_nonblocking(out_fd.get());
  set_nonblocking(err_fd.get());
  asio::posix::stream_descriptor out(ex, out_fd.release()), err(ex, err_fd.release());
  asio::steady_timer timer(ex);
  auto rd = asio::posix::stream_descriptor::wait_read;
  auto tok = asio::as_tuple(asio::use_awaitable);
  const auto start = std::chrono::steady_clock::now();
  auto last_tick = start;
  std::string stdout_data, stderr_tail;
  bool out_open = true, err_open = true, stdout_over = false, timed_out = false, stopped = false;
  while (out_open || err_open) {
    timer.expires_after(std::chrono::milliseconds(250));
    if (out_open && err_open) co_await (out.async_wait(rd, tok) || err.async_wait(rd, tok) || timer.async_wait(tok));
    else if (out_open) co_await (out.async_wait(rd, tok) || timer.async_wait(tok));
    else co_await (err.async_wait(rd, tok) || timer.async_wait(tok));
    if (out_open) out_open = drain(out.native_handle(), stdout_data, kMaxStdoutBytes, stdout_over);
    if (err_open) err_open = drain_tail(err.native_handle(), stderr_tail, kMaxStderrTailBytes);
    auto now = std::chrono::steady_clock::now();
    if (now - start > req.timeout && !timed_out) {
      timed_out = true;  // the command and all it started, then the pipes close
      if (cgroup) cgroup->kill_all();
      child->kill(SIGKILL);
    }
    if (now - last_tick > std::chrono::seconds(1) && !stopped && !timed_out) {
      last_tick = now;
      const bool wanted = co_await tick();
      if (!wanted) {  // the coordinator gave the task up: nothing it computes now counts
        stopped = true;
        if (cgroup) cgroup->kill_all();
        child->kill(SIGKILL);
      }
    }
  }
  exec::ExitInfo exit = co_await child->wait();
  cgroup.reset();  // kills any straggler, removes the group
  if (timed_out) co_return fail(errc::timeout, "the shard ran past its time limit");
  if (stopped) co_return fail(errc::closed, "stopped: the coordinator no longer wants this task");
  if (stdout_over) co_return fail(errc::too_large, "stdout is over " + std::to_string(kMaxStdoutBytes) + " bytes");
  TaskOutput result;
  result.exit_code = exit.status;
  result.stdout_data = std::move(stdout_data);
  if (exit.status != 0) result.stderr_tail = std::move(stderr_tail);  // exit status is a result: why, for the submitter
  auto files = collect_out(ws / "out");
  if (!files) co_return files.error();
  result.files = std::move(*files);
  co_return result;
}

}  // namespace runsnack::pool
