// `runsnack cuda-server --fd N [--backend driver|host]`: hidden; the provider's
// cuda service execs it once per session with the session's socket on fd N.
#include "cli/command.hpp"
#include "cuda/server/serve.hpp"

#include <sys/stat.h>

#include <cstdlib>

namespace runsnack::cli {

void add_cuda_server_command(CLI::App& app, ExitStatus& status) {
  struct Opts {
    int fd = -1;
    std::string backend;
  };
  auto opts = std::make_shared<Opts>();
  const char* env = std::getenv("RUNSNACK_CUDA_BACKEND");
  opts->backend = env != nullptr && *env != '\0' ? env : "driver";
  auto* cmd = app.add_subcommand("cuda-server", "Serve one remote CUDA client on an inherited socket (internal)");
  cmd->group("");  // hidden from the main help
  cmd->add_option("--fd", opts->fd, "Connected stream socket to serve until EOF")->required();
  cmd->add_option("--backend", opts->backend, "driver (the real GPU) or host (a test double that runs only its test kernels)")
      ->capture_default_str()
      ->check(CLI::IsMember({"driver", "host"}));
  cmd->callback([opts, &status] {
    run_command(status, [opts] {
      struct stat st {};
      if (::fstat(opts->fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
        return report("cuda-server: fd " + std::to_string(opts->fd) + " is not an open socket");
      }
      auto backend = cuda::make_backend(opts->backend);
      if (!backend) return report("unknown CUDA backend " + opts->backend);
      cuda::ServeOptions options;
      options.capture_stdout = true;  // device printf goes back to the client
      return cuda::serve_cuda(opts->fd, *backend, options) == 0 ? 0 : kExitFailure;
    });
  });
}

}  // namespace runsnack::cli
