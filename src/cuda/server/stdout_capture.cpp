// StdoutCapture: fd 1 redirected into a pipe that a thread keeps drained (stdout_capture.hpp).
#include "cuda/server/stdout_capture.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <utility>

namespace runsnack::cuda {

StdoutCapture::StdoutCapture() {
  int p[2];
  if (::pipe(p) != 0) return;
  std::fflush(stdout);
  saved_ = ::dup(1);
  ::dup2(p[1], 1);
  ::close(p[1]);
  ::fcntl(p[0], F_SETFL, O_NONBLOCK);
  read_ = p[0];
  thread_ = std::thread([this] { run(); });
}

StdoutCapture::~StdoutCapture() {
  if (read_ < 0) return;
  std::fflush(stdout);
  ::dup2(saved_, 1);  // closes the pipe's last write end: run() sees EOF
  ::close(saved_);
  thread_.join();
  ::close(read_);
}

std::vector<std::uint8_t> StdoutCapture::take() {
  std::fflush(stdout);
  std::lock_guard lock(mutex_);
  drain_locked();
  return std::exchange(pending_, {});
}

bool StdoutCapture::drain_locked() {
  std::uint8_t buf[65536];
  for (;;) {
    ssize_t n = ::read(read_, buf, sizeof buf);
    if (n > 0) {
      pending_.insert(pending_.end(), buf, buf + n);
      continue;
    }
    return n != 0;  // n < 0: EAGAIN (nothing more now) or EINTR
  }
}

void StdoutCapture::run() {
  for (;;) {
    pollfd p{read_, POLLIN, 0};
    if (::poll(&p, 1, -1) < 0 && errno != EINTR) return;
    std::lock_guard lock(mutex_);
    if (!drain_locked()) return;
  }
}

}  // namespace runsnack::cuda
