#include "pool/exec_task.hpp"

#include "pool/wire.hpp"
#include "services/exec/sandbox.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

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

asio::awaitable<Result<TaskOutput>> run_exec_task(ExecTaskRequest req, std::function<asio::awaitable<void>()> tick) {
  std::error_code ec;
  fs::path ws = req.task_dir / "workspace";
  fs::create_directories(ws, ec);
  if (ec) co_return fail(errc::io_error, "cannot create " + ws.string() + ": " + ec.message());
  if (fs::is_directory(req.input_dir, ec)) {
    fs::copy(req.input_dir, ws, fs::copy_options::recursive, ec);
    if (ec) co_return fail(errc::io_error, "cannot copy the inputs: " + ec.message());
  }
  fs::create_directories(ws / "out", ec);

  exec::SandboxSpec spec;
  spec.workspace = ws;
  spec.argv = req.argv;
  spec.env = {{"RUNSNACK_SHARD", std::to_string(req.shard)}, {"RUNSNACK_SHARDS", std::to_string(req.shards)}};
  spec.hidden = req.hidden;
  exec::Sandbox sandbox(spec);
  std::vector<std::string> argv = sandbox.argv(), envp = sandbox.envp();
  std::vector<char*> cargv, cenvp;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (auto& e : envp) cenvp.push_back(e.data());
  cenvp.push_back(nullptr);

  std::string out_path = (req.task_dir / "stdout").string(), err_path = (req.task_dir / "stderr").string();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, cargv[0], &actions, &attr, cargv.data(), cenvp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) co_return fail(errc::io_error, std::string("cannot start bwrap: ") + std::strerror(rc));

  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer timer(ex);
  auto start = std::chrono::steady_clock::now(), last_tick = start;
  int status = 0;
  while (true) {
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    auto now = std::chrono::steady_clock::now();
    if (now - start > req.timeout) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      co_return fail(errc::timeout, "the shard ran past its time limit");
    }
    if (now - last_tick > std::chrono::seconds(1)) {
      last_tick = now;
      co_await tick();
    }
    timer.expires_after(std::chrono::milliseconds(10));
    co_await timer.async_wait(asio::use_awaitable);
  }
  TaskOutput out;
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  auto data = read_bounded(out_path, kMaxStdoutBytes, "stdout");
  if (!data) co_return data.error();
  out.stdout_data = std::move(*data);
  auto files = collect_out(ws / "out");
  if (!files) co_return files.error();
  out.files = std::move(*files);
  co_return out;
}

}  // namespace runsnack::pool
