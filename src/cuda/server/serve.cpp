// serve_cuda: the frame loop of one cuda-server connection; make_backend picks the backend.
#include "cuda/server/serve.hpp"

#include "cuda/server/client_session.hpp"
#include "cuda/server/driver_backend.hpp"
#include "cuda/server/frame_io.hpp"
#include "cuda/server/host_backend.hpp"
#include "cuda/server/stdout_capture.hpp"

#include <signal.h>

#include <cstdio>
#include <memory>

namespace runsnack::cuda {

using wire::Op;

int serve_cuda(int fd, Backend& backend, const ServeOptions& options) {
  ::signal(SIGPIPE, SIG_IGN);
  std::unique_ptr<StdoutCapture> capture;
  if (options.capture_stdout) capture = std::make_unique<StdoutCapture>();
  ClientSession session(fd, backend, capture.get());
  std::vector<std::uint8_t> payload;
  for (;;) {
    std::uint8_t head[wire::kHeaderSize];
    int rc = read_all(fd, head, sizeof head);
    if (rc == 1) return 0;
    if (rc < 0) {
      std::fprintf(stderr, "runsnack cuda-server: connection lost mid-frame\n");
      return 1;
    }
    wire::Header h;
    std::string err = wire::decode_header(head, h);
    if (err.empty() && (h.op == Op::Reply || h.op == Op::Output)) err = "cuda wire: a client sent a server frame";
    if (!err.empty()) {
      std::fprintf(stderr, "runsnack cuda-server: %s\n", err.c_str());
      return 1;
    }
    if (read_payload(fd, h.length, payload) != 0) {
      std::fprintf(stderr, "runsnack cuda-server: connection lost mid-frame\n");
      return 1;
    }
    err = session.handle(h, payload.data());
    if (!err.empty()) {
      std::fprintf(stderr, "runsnack cuda-server: %s\n", err.c_str());
      return 1;
    }
  }
}

std::unique_ptr<Backend> make_backend(const std::string& name) {
  if (name == "driver") return std::make_unique<DriverBackend>();
  if (name == "host") return std::make_unique<HostBackend>();
  return nullptr;
}

}  // namespace runsnack::cuda
