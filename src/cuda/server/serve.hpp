// The provider half of remote CUDA: executes one client's frames on a Backend.
#pragma once

#include "cuda/server/backend.hpp"

#include <memory>
#include <string>

namespace runsnack::cuda {

struct ServeOptions {
  // Make fd 1 a pipe and send what is written to it (device printf) to the
  // client as Output frames ahead of the next reply. Only for a process that
  // serves one client.
  bool capture_stdout = false;
};

// Reads frames from the connected stream socket `fd` until EOF, executes
// them and replies. At EOF or on a malformed frame it frees every handle this
// connection created. Returns 0 at a clean EOF, 1 after a protocol error
// (logged to stderr in one line). Does not close `fd`.
int serve_cuda(int fd, Backend& backend, const ServeOptions& options = {});

// "driver" or "host"; nullptr for any other name.
std::unique_ptr<Backend> make_backend(const std::string& name);

}  // namespace runsnack::cuda
