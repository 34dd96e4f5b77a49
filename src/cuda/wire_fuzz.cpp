// Feeds arbitrary bytes to serve_cuda (HostBackend) as one client's stream:
// every input must end in a clean return, never a crash or a hang.
#include "cuda/server/host_backend.hpp"
#include "cuda/server/serve.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <thread>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 0;
  // The client end writes the input while another thread drains the replies,
  // so neither side can block the other.
  std::thread writer([&] {
    std::size_t off = 0;
    while (off < size) {
      ssize_t w = ::write(sv[0], data + off, size - off);
      if (w <= 0) break;
      off += static_cast<std::size_t>(w);
    }
    ::shutdown(sv[0], SHUT_WR);
  });
  std::thread drain([&] {
    char buf[65536];
    while (::read(sv[0], buf, sizeof buf) > 0) {
    }
  });
  runsnack::cuda::HostBackend backend;
  runsnack::cuda::serve_cuda(sv[1], backend);
  ::shutdown(sv[1], SHUT_RDWR);
  writer.join();
  drain.join();
  ::close(sv[0]);
  ::close(sv[1]);
  return 0;
}
