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

Result<fs::path> state_dir() {
  fs::path dir;
  if (const char* home = std::getenv("RUNSNACK_HOME"); home && *home) {
    dir = home;
  } else if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg) {
    dir = fs::path(xdg) / "runsnack";
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    dir = fs::path(h) / ".local" / "share" / "runsnack";
  } else {
    return fail(errc::not_found, "no state directory: set RUNSNACK_HOME or HOME");
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail(errc::io_error, "cannot create state directory " + dir.string() + ": " + ec.message());
  ::chmod(dir.c_str(), 0700);
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
