// Blocking whole-buffer reads and writes on the cuda-server's socket (frame_io.hpp).
#include "cuda/server/frame_io.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace runsnack::cuda {

bool write_all(int fd, const std::uint8_t* p, std::size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

// 0: got n bytes; 1: EOF before the first byte; -1: error or EOF mid-way.
int read_all(int fd, std::uint8_t* p, std::size_t n) {
  std::size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd, p + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return got == 0 ? 1 : -1;
    if (r < 0) return -1;
    got += static_cast<std::size_t>(r);
  }
  return 0;
}

// A frame's payload as it arrives: the buffer grows (at most doubling) only
// once what it holds has come, so a client announcing kMaxPayload and
// stalling makes us hold 64 KiB. The buffer is reused between frames.
int read_payload(int fd, std::uint32_t length, std::vector<std::uint8_t>& payload) {
  std::size_t got = 0;
  while (got < length) {
    std::size_t step = std::min<std::size_t>(length - got, std::max<std::size_t>(got, 64 * 1024));
    if (payload.size() < got + step) payload.resize(got + step);
    if (read_all(fd, payload.data() + got, step) != 0) return -1;
    got += step;
  }
  payload.resize(length);
  return 0;
}

}  // namespace runsnack::cuda
