// `runsnack cuda LINK -- CMD [ARGS...]`: CMD runs here, its CUDA calls run on
// the provider's GPU. CMD starts with RunSnack's libcuda.so.1 first on its
// library path (src/cuda/shim) and RUNSNACK_CUDA_SOCKET naming a unix socket
// in a private folder; each connection the shim makes there (one per CUDA
// process) becomes one "cuda" stream in the session, with a cuda-server
// behind it on the provider (services/cuda/cuda_service.hpp). This command
// only relays bytes.
#include "cli/command.hpp"
#include "cli/command_words.hpp"
#include "cli/link_arg.hpp"
#include "cli/session_runner.hpp"
#include "core/json_fields.hpp"
#include "core/printable.hpp"
#include "cuda/shim_location.hpp"
#include "services/cuda/cuda_service.hpp"
#include "services/common/pump.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>

extern char** environ;

namespace runsnack::cli {

namespace asio = boost::asio;
namespace sfs = std::filesystem;
using asio::local::stream_protocol;

namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
constexpr std::chrono::milliseconds kPoll{100};
// After CMD exits, how long its connections may take to finish cleanly
// (the provider's servers see EOF and exit) before the session is closed under them.
constexpr std::chrono::milliseconds kDrain{3000};

struct CudaArgs {
  std::string link;
  bool json = false;
  double timeout_s = 10;
  std::vector<std::string> command;
};

// CMD as a path to exec: as given when it has a '/', else the first match on PATH.
Result<std::string> find_program(const std::string& name) {
  auto usable = [](const std::string& p) {
    struct stat st{};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) {
    if (usable(name)) return name;
    if (::access(name.c_str(), F_OK) != 0) return fail(errc::not_found, name + ": no such file");
    return fail(errc::invalid_argument, name + ": not an executable file");
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    std::size_t colon = dirs.find(':', start);
    if (colon == std::string::npos) colon = dirs.size();
    std::string dir = dirs.substr(start, colon - start);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (usable(candidate)) return candidate;
    start = colon + 1;
  }
  return fail(errc::not_found, name + ": command not found");
}

// A private folder (0700) holding the socket; removed with everything in it.
struct SocketDir {
  sfs::path dir;
  ~SocketDir() {
    std::error_code ignored;
    if (!dir.empty()) sfs::remove_all(dir, ignored);
  }
  sfs::path socket() const { return dir / "cuda.sock"; }
};

Result<std::unique_ptr<SocketDir>> make_socket_dir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/runsnack-cuda-XXXXXX";
  // A unix socket path must fit sun_path (108 bytes): fall back to /tmp for a long TMPDIR.
  if (templ.size() + 10 >= sizeof(sockaddr_un::sun_path)) templ = "/tmp/runsnack-cuda-XXXXXX";
  if (!::mkdtemp(templ.data()))
    return fail(errc::io_error,
                "cannot make a private folder for the CUDA socket: " + std::string(std::strerror(errno)));
  auto dir = std::make_unique<SocketDir>();
  dir->dir = templ;
  return dir;
}

// Signals sent to this process by another one (kill, a supervisor) are
// passed on to CMD. A terminal's Ctrl-C is not: CMD is in our process group
// and gets it from the kernel itself (as sudo tells the two apart, by si_code).
int g_signal_pipe = -1;

void on_signal(int sig, siginfo_t* info, void*) {
  if (info && info->si_code > 0) return;  // from the kernel: the terminal
  const int saved = errno;
  const unsigned char b = static_cast<unsigned char>(sig);
  (void)::write(g_signal_pipe, &b, 1);
  errno = saved;
}

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

Result<int> catch_signals() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) return fail(errc::io_error, "pipe");
  g_signal_pipe = p[1];
  struct sigaction sa{};
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int s : kForwarded) ::sigaction(s, &sa, nullptr);
  return p[0];
}

// Starts CMD with our stdin/stdout/stderr, in our process group, default
// signal dispositions, and no other descriptor of ours: the session's TCP
// socket (asio opens it without close-on-exec) must not outlive us in CMD,
// or the provider would not see us go until its keepalive gives up.
Result<pid_t> spawn_program(const std::string& path, const std::vector<std::string>& argv,
                            const std::vector<std::string>& env) {
  std::vector<char*> a, e;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  for (const auto& s : env) e.push_back(const_cast<char*>(s.c_str()));
  e.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults, none;
  sigemptyset(&defaults);
  for (int s : kForwarded) sigaddset(&defaults, s);
  sigaddset(&defaults, SIGPIPE);  // main() ignores it; CMD must not inherit that
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addclosefrom_np(&files, 3);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, path.c_str(), &files, &attr, a.data(), e.data());
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return fail(errc::io_error, "cannot start " + path + ": " + std::strerror(rc));
  return pid;
}

std::vector<std::string> program_environment(const sfs::path& socket, const sfs::path& shim_dir) {
  std::vector<std::string> env;
  std::string library_path = shim_dir.string();
  for (char** p = environ; p && *p; ++p) {
    std::string_view kv(*p);
    if (kv.starts_with("RUNSNACK_CUDA_SOCKET=")) continue;
    if (kv.starts_with("LD_LIBRARY_PATH=")) {
      auto old = kv.substr(std::strlen("LD_LIBRARY_PATH="));
      if (!old.empty()) library_path += ":" + std::string(old);
      continue;
    }
    env.emplace_back(kv);
  }
  env.push_back("RUNSNACK_CUDA_SOCKET=" + socket.string());
  env.push_back("LD_LIBRARY_PATH=" + library_path);
  return env;
}

// What the command's coroutines share; lives until the last of them ends.
struct CudaState {
  Session* session = nullptr;  // valid while body() runs, which outlives every coroutine below
  std::string program;
  bool finishing = false;  // CMD exited: stop watching, accept no more
  bool session_lost = false;
  int active = 0;  // coroutines that may touch the session
  std::uint64_t connections = 0, refused = 0;
  std::uint64_t bytes_to_provider = 0, bytes_from_provider = 0;
  std::optional<std::string> first_refusal;
};

// Says once, when it is first noticed, that the session ended under CMD.
void note_session_end(CudaState& state) {
  if (state.session_lost || !state.session->mux().is_closed()) return;
  state.session_lost = true;
  auto why = state.session->mux().close_reason();
  std::cerr << "runsnack: the session to the provider ended (" << printable(why ? why->what() : std::string("closed"))
            << "): " << state.program << "'s CUDA calls fail from now on" << std::endl;
}

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer timer(co_await asio::this_coro::executor, d);
  co_await timer.async_wait(kTuple);
}

// One of CMD's CUDA processes: one stream, one cuda-server on the provider.
asio::awaitable<void> serve_connection(std::shared_ptr<CudaState> state, stream_protocol::socket socket) {
  struct Active {
    CudaState& s;
    ~Active() { --s.active; }
  } active{*state};  // counted by the caller, before this frame existed
  if (state->session_lost) co_return;  // closing the socket: the shim reports the error
  widen_socket_buffers(socket.native_handle());
  auto stream = co_await cuda::open_cuda(*state->session);
  std::optional<std::string> refused;
  if (!stream) refused = stream.error().what();
  PumpResult result;
  if (stream) {
    PumpOptions options;
    options.buffer_bytes = cuda::kPumpBytes;
    // The program's first calls follow the header now; the provider's answers gate the way back.
    options.before_stream_to_socket = [&]() -> asio::awaitable<Result<void>> {
      auto started = co_await state->session->answers(**stream, cuda::kServiceCuda);
      if (!started) {
        refused = started.error().what();
        co_return started.error();
      }
      ++state->connections;
      co_return Result<void>{};
    };
    result = co_await pump(socket, **stream, options);
  }
  if (refused) {
    ++state->refused;
    if (!state->first_refusal) {
      state->first_refusal = *refused;
      std::cerr << "runsnack: the provider did not start a CUDA server for " << state->program << ": "
                << printable(*refused) << std::endl;
    }
    co_return;
  }
  state->bytes_to_provider += result.socket_to_stream;
  state->bytes_from_provider += result.stream_to_socket;
  if (result.stream_failed) note_session_end(*state);
}

asio::awaitable<void> accept_loop(std::shared_ptr<CudaState> state,
                                  std::shared_ptr<stream_protocol::acceptor> acceptor) {
  auto ex = co_await asio::this_coro::executor;
  while (!state->finishing) {
    auto [ec, socket] = co_await acceptor->async_accept(kTuple);
    if (state->finishing || ec == asio::error::operation_aborted) break;
    if (ec) {
      co_await sleep_for(kPoll);  // out of descriptors and the like: do not spin
      continue;
    }
    ++state->active;
    asio::co_spawn(ex, serve_connection(state, std::move(socket)), asio::detached);
  }
}

// Notices a session that ends while no connection is open.
asio::awaitable<void> watch_session(std::shared_ptr<CudaState> state) {
  while (!state->finishing && !state->session_lost) {
    note_session_end(*state);
    co_await sleep_for(kPoll);
  }
  --state->active;
}

// Passes signals sent to us on to CMD until `pipe` is closed.
asio::awaitable<void> pass_signals(std::shared_ptr<asio::posix::stream_descriptor> pipe, pid_t pid,
                                   std::shared_ptr<bool> reaped) {
  unsigned char sigs[16];
  for (;;) {
    auto [ec, n] = co_await pipe->async_read_some(asio::buffer(sigs), kTuple);
    if (ec) co_return;
    for (std::size_t i = 0; i < n; ++i)
      if (!*reaped) ::kill(pid, sigs[i]);
  }
}

// Waits for CMD and reaps it: its exit code, or 128+signal.
asio::awaitable<std::pair<int, std::optional<int>>> wait_program(pid_t pid) {
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    asio::posix::stream_descriptor d(co_await asio::this_coro::executor, pidfd);
    (void)co_await d.async_wait(asio::posix::stream_descriptor::wait_read, kTuple);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) co_return std::pair{128 + WTERMSIG(status), std::optional<int>(WTERMSIG(status))};
  co_return std::pair{WEXITSTATUS(status), std::optional<int>()};
}

asio::awaitable<int> cuda_body(const CudaArgs& args, const std::string& program, const sfs::path& shim_dir,
                               Session& session) {
  auto offered = co_await cuda::check_cuda(session);
  if (!offered) {
    if (offered.error().message.find("does not allow") != std::string::npos)
      co_return report("this link does not allow CUDA: ask the provider to share with --allow cuda");
    co_return report(offered.error());
  }
  if (!bool_or(*offered, "available", false))
    co_return report("the provider offers no CUDA: " + string_or(*offered, "note", "no driver"));

  auto dir = make_socket_dir();
  if (!dir) co_return report(dir.error());
  auto ex = co_await asio::this_coro::executor;
  auto acceptor = std::make_shared<stream_protocol::acceptor>(ex);
  boost::system::error_code ec;
  const stream_protocol::endpoint endpoint((*dir)->socket().string());
  acceptor->open(endpoint.protocol(), ec);
  if (!ec) acceptor->bind(endpoint, ec);
  if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) co_return report("cannot listen on " + (*dir)->socket().string() + ": " + ec.message());

  auto signal_fd = catch_signals();
  if (!signal_fd) co_return report(signal_fd.error());
  auto signal_pipe = std::make_shared<asio::posix::stream_descriptor>(ex, *signal_fd);

  const std::vector<std::string> env = program_environment((*dir)->socket(), shim_dir);
  auto pid = spawn_program(program, args.command, env);
  if (!pid) co_return report(pid.error());
  const auto started = std::chrono::steady_clock::now();
  if (!args.json && ::isatty(STDERR_FILENO))
    std::cerr << "runsnack: " << args.command[0] << " runs here; its CUDA calls run on " << session.info().peer.str()
              << " (" << string_or(*offered, "note") << ")" << std::endl;

  auto state = std::make_shared<CudaState>();
  state->session = &session;
  state->program = args.command[0];
  auto reaped = std::make_shared<bool>(false);
  state->active = 1;  // watch_session
  asio::co_spawn(ex, accept_loop(state, acceptor), asio::detached);
  asio::co_spawn(ex, watch_session(state), asio::detached);
  asio::co_spawn(ex, pass_signals(signal_pipe, *pid, reaped), asio::detached);

  const auto [status, killed_by] = co_await wait_program(*pid);
  *reaped = true;
  note_session_end(*state);
  state->finishing = true;
  acceptor->close(ec);
  signal_pipe->close(ec);
  // CMD's sockets closed with it: let the relays finish, then cut what is left.
  for (auto until = std::chrono::steady_clock::now() + kDrain;
       state->active > 0 && std::chrono::steady_clock::now() < until;)
    co_await sleep_for(std::chrono::milliseconds(10));
  if (state->active > 0) session.mux().close();
  while (state->active > 0) co_await sleep_for(std::chrono::milliseconds(10));

  if (args.json)
    print_json({{"event", "exit"},
                {"status", status},
                {"signal", killed_by ? nlohmann::json(*killed_by) : nlohmann::json(nullptr)},
                {"connections", state->connections},
                {"refused", state->refused},
                {"bytes_to_provider", state->bytes_to_provider},
                {"bytes_from_provider", state->bytes_from_provider},
                {"session_lost", state->session_lost},
                {"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()}});
  co_return status;
}

int cuda_command(const CudaArgs& args) {
  if (args.command.empty())
    return report("nothing to run: give the command after --, e.g. runsnack cuda LINK -- ./vectorAdd");
  auto program = find_program(args.command[0]);
  if (!program) return report(program.error());
  auto shim_dir = cuda::find_cuda_shim_dir();
  if (!shim_dir)
    return report("RunSnack's CUDA driver shim (libcuda.so.1) was not found: build it (`ninja -C build/release "
                  "runsnack` with the CUDA toolkit installed puts it in build/release/cuda-shim), or set "
                  "RUNSNACK_CUDA_LIBDIR to the folder that holds it");
  SessionCommand command;
  command.link_arg = args.link;
  command.connect_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(args.timeout_s * 1000));
  command.pipelined_proof = true;  // check_cuda's stream follows the proof
  const std::string path = *program;
  const sfs::path shim = *shim_dir;
  command.body = [&args, path, shim](Session& session) -> asio::awaitable<int> {
    co_return co_await cuda_body(args, path, shim, session);
  };
  return run_session_command(command);
}

}  // namespace

void add_cuda_command(CLI::App& app, ExitStatus& status) {
  auto args = std::make_shared<CudaArgs>();
  auto* cmd = app.add_subcommand("cuda", "Run a CUDA program here with its CUDA calls on the provider's GPU");
  cmd->add_option("LINK", args->link, kLinkHelp);
  cmd->add_flag("--json", args->json,
                "At the end, one JSON line: status, signal, connections, refused, bytes_to_provider, "
                "bytes_from_provider, session_lost, seconds");
  cmd->add_option("--timeout", args->timeout_s, "Seconds to wait for the provider")->capture_default_str();
  cmd->add_option("CMD", args->command, "The command and its arguments, after -- (all words after -- are CMD)");
  cmd->footer(
      "The program runs HERE, on this machine, with its files, input and output; its CUDA calls (memory,\n"
      "copies, kernel launches) run on the provider's GPU, through RunSnack's libcuda.so.1 put first on its\n"
      "library path. No GPU or CUDA driver is needed here; the program is unmodified. The link must allow it:\n"
      "the provider shares with `runsnack share --allow cuda`. Each CUDA process gets its own server on the\n"
      "provider, inside the link's limits; when the session drops, the program's CUDA calls fail.\n"
      "Exits with the program's status (128+N when killed by signal N). Signals sent to runsnack reach the\n"
      "program; Ctrl-C at a terminal reaches it directly.\n"
      "Examples:  runsnack cuda LINK -- ./vectorAdd\n"
      "           runsnack cuda LINK -- python train.py --epochs 3\n"
      "New: see docs/CUDA.md for what works so far.");
  cmd->callback([&status, args] {
    take_command(args->command, "runsnack cuda [LINK] -- CMD [ARGS...]");
    run_command(status, [&] { return cuda_command(*args); });
  });
}

}  // namespace runsnack::cli
