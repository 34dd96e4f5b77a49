#include "core/paths.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

namespace runsnack {

namespace fs = std::filesystem;

namespace {

std::optional<std::string> env_value(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

StateScope g_scope = StateScope::user;  // set once by the CLI before a command runs

bool same_dir(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  if (fs::equivalent(a, b, ec)) return true;
  return a.lexically_normal() == b.lexically_normal();
}

}  // namespace

StateEnvironment StateEnvironment::current(const fs::path& machine_dir) {
  StateEnvironment env;
  env.runsnack_home = env_value("RUNSNACK_HOME");
  env.xdg_data_home = env_value("XDG_DATA_HOME");
  env.home = env_value("HOME");
  struct stat st {};
  env.machine_dir_usable = ::stat(machine_dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
                           ::access(machine_dir.c_str(), W_OK | X_OK) == 0;
  return env;
}

Result<StateChoice> choose_state_dir(StateScope scope, const StateEnvironment& env, const fs::path& machine_dir) {
  if (env.runsnack_home) return StateChoice{*env.runsnack_home, StateSource::runsnack_home};
  if (scope == StateScope::machine && env.machine_dir_usable) return StateChoice{machine_dir, StateSource::machine};
  if (env.xdg_data_home) return StateChoice{fs::path(*env.xdg_data_home) / "runsnack", StateSource::xdg};
  if (env.home) return StateChoice{fs::path(*env.home) / ".local" / "share" / "runsnack", StateSource::home};
  return fail(errc::not_found, "no state directory: set RUNSNACK_HOME or HOME");
}

void select_state_scope(StateScope scope) { g_scope = scope; }

StateSource state_source() {
  auto choice = choose_state_dir(g_scope, StateEnvironment::current());
  return choice ? choice->source : StateSource::home;
}

bool state_is_machine_wide() {
  auto choice = choose_state_dir(g_scope, StateEnvironment::current());
  return choice && same_dir(choice->dir, kMachineStateDir);
}

unsigned shared_file_mode() { return state_is_machine_wide() ? 0660 : 0600; }

Result<fs::path> state_dir() {
  auto choice = choose_state_dir(g_scope, StateEnvironment::current());
  if (!choice) return choice.error();
  const fs::path& dir = choice->dir;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail(errc::io_error, "cannot create state directory " + dir.string() + ": " + ec.message());
  // The machine's folder keeps the mode its package gave it (2770, group runsnack).
  if (!same_dir(dir, kMachineStateDir)) ::chmod(dir.c_str(), 0700);
  return dir;
}

Result<void> write_file_atomic(const fs::path& path, std::string_view contents, unsigned mode) {
  fs::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return fail(errc::io_error, "cannot write " + tmp.string() + ": " + std::strerror(errno));
  std::size_t done = 0;
  while (done < contents.size()) {
    ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return fail(errc::io_error, "cannot write " + tmp.string() + ": " + std::strerror(err));
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return fail(errc::io_error, "cannot flush " + tmp.string() + ": " + std::strerror(errno));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return fail(errc::io_error, "cannot replace " + path.string() + ": " + std::strerror(err));
  }
  return {};
}

Result<std::string> read_file(const fs::path& path, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(errc::not_found, "cannot open " + path.string());
  std::string data;
  char buf[8192];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    data.append(buf, static_cast<std::size_t>(in.gcount()));
    if (data.size() > max_bytes) return fail(errc::too_large, path.string() + " is larger than expected");
  }
  return data;
}

}  // namespace runsnack
