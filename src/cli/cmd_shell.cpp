// `runsnack shell LINK`: an interactive shell in the provider's sandbox, on a
// pty of its own (services/exec/shell_service.hpp has the protocol). The
// local terminal is raw while it runs; window size changes travel as they
// happen; the exit status is the remote shell's.
#include "cli/cmd_shell.hpp"

#include "cli/link_arg.hpp"
#include "cli/raw_terminal.hpp"
#include "cli/session_end.hpp"
#include "cli/session_runner.hpp"
#include "cli/workspace_arg.hpp"
#include "core/json_fields.hpp"
#include "core/printable.hpp"
#include "services/exec/shell_service.hpp"
#include "fs/transfer.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>

namespace runsnack::cli {

namespace asio = boost::asio;

namespace {

struct ShellArgs {
  std::string link;
  std::string workspace;  // --workspace, then the one used (workspace_arg.hpp)
};

// The local window: stdin's terminal, else stdout's, else 24x80.
nlohmann::json window_json() {
  winsize ws{};
  if (::ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) != 0 && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0) ws = {};
  if (ws.ws_row == 0 || ws.ws_col == 0) ws.ws_row = 24, ws.ws_col = 80;
  return {{"rows", ws.ws_row}, {"cols", ws.ws_col}};
}

void write_all(int fd, const std::vector<std::uint8_t>& data) {
  std::size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += static_cast<std::size_t>(n);
  }
}

// Keystrokes to the provider as they come; stops at EOF or when cancelled.
asio::awaitable<void> forward_stdin(std::shared_ptr<MuxStream> stream,
                                    std::shared_ptr<asio::posix::stream_descriptor> input) {
  std::vector<std::uint8_t> buf(16 * 1024);
  for (;;) {
    auto [ec] = co_await input->async_wait(asio::posix::stream_descriptor::wait_read,
                                           asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
    ssize_t n = ::read(input->native_handle(), buf.data(), buf.size());
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) co_return;  // EOF: the remote shell keeps what it has
    const std::span<const std::uint8_t> chunk(buf.data(), static_cast<std::size_t>(n));
    if (!co_await fs::write_frame(*stream, fs::FrameType::in, chunk)) co_return;
  }
}

// SIGWINCH: the new size to the provider. SIGTERM/SIGHUP/SIGINT: end the
// session (the provider kills the shell) and remember the signal.
asio::awaitable<void> handle_signals(std::shared_ptr<MuxStream> stream, std::shared_ptr<asio::signal_set> signals,
                                     std::shared_ptr<int> terminated_by) {
  for (;;) {
    auto [ec, sig] = co_await signals->async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
    if (sig == SIGWINCH) {
      nlohmann::json msg = window_json();
      msg["type"] = "winsize";
      if (!co_await fs::write_control(*stream, msg)) co_return;
      continue;
    }
    *terminated_by = sig;
    (void)co_await stream->close_write();
    co_return;
  }
}

asio::awaitable<int> shell_body(Session& session, const std::string& workspace) {
  nlohmann::json args = in_workspace(window_json(), workspace);
  const char* term = std::getenv("TERM");
  args["term"] = term && *term ? term : "xterm-256color";
  StreamHeader header{exec::kServiceShell, std::move(args)};
  auto opened = co_await session.open(header);
  if (!opened) co_return report(opened.error());
  std::shared_ptr<MuxStream> stream = *opened;
  auto first = co_await fs::read_control(*stream);
  if (!first) co_return report(Error(first.error().code, "the provider closed the shell: " + first.error().what()));
  if ((*first)["type"] == "error") co_return report(string_or(*first, "message", "the provider refused"));

  auto ex = co_await asio::this_coro::executor;
  auto signals = std::make_shared<asio::signal_set>(ex, SIGWINCH, SIGTERM, SIGHUP);
  signals->add(SIGINT);
  auto terminated_by = std::make_shared<int>(0);
  asio::co_spawn(ex, handle_signals(stream, signals, terminated_by), asio::detached);
  // A duplicate, so that cancelling and closing ours never closes the user's stdin.
  auto input = std::make_shared<asio::posix::stream_descriptor>(ex, ::dup(STDIN_FILENO));
  std::optional<RawTerminal> raw;
  raw.emplace(STDIN_FILENO);
  asio::co_spawn(ex, forward_stdin(stream, input), asio::detached);

  int status = -1;
  std::string failure, reason;
  for (;;) {
    auto f = co_await fs::read_frame(*stream);
    if (!f) {
      failure = session.mux().is_closed() ? session_end_text(session) : f.error().what();
      break;
    }
    if (f->type == fs::FrameType::out) {
      write_all(STDOUT_FILENO, f->payload);
    } else if (f->type == fs::FrameType::control) {
      auto j = fs::decode_control(f->payload);
      if (!j) continue;
      if ((*j)["type"] == "exit") {
        status = int_or(*j, "status", 1);
        reason = string_or(*j, "reason");
        break;
      }
      if ((*j)["type"] == "error") {
        failure = string_or(*j, "message", "the provider stopped the shell");
        break;
      }
    }
  }
  signals->cancel();
  input->cancel();
  (void)co_await stream->close_write();
  raw.reset();  // the user's terminal back before anything is printed
  if (*terminated_by) co_return 128 + *terminated_by;
  if (status < 0) co_return report(failure);
  if (!reason.empty()) std::cerr << "runsnack: remote shell stopped: " << printable(reason) << std::endl;
  co_return status;
}

}  // namespace

void add_shell_command(CLI::App& app, ExitStatus& status) {
  auto args = std::make_shared<ShellArgs>();
  auto* cmd = app.add_subcommand("shell", "An interactive shell in the provider's sandbox (the link must allow shell)");
  cmd->add_option("LINK", args->link, kLinkHelp);
  add_workspace_option(cmd, args->workspace);
  cmd->footer("Runs a login shell in your workspace on the provider (the one of this folder, which\n"
              "`runsnack run` here syncs to, or --workspace NAME), with the same sandbox and limits as\n"
              "`runsnack run`. Exits with the remote shell's status. Works in tmux and over ssh.");
  cmd->callback([&status, args] {
    run_command(status, [&] {
      auto workspace = chosen_workspace(args->workspace, std::filesystem::current_path());
      if (!workspace) return report(workspace.error());
      SessionCommand command;
      command.link_arg = args->link;
      command.pipelined_proof = true;  // the shell's stream follows the proof
      command.body = [name = *workspace](Session& session) -> asio::awaitable<int> {
        co_return co_await shell_body(session, name);
      };
      return run_session_command(command);
    });
  });
}

}  // namespace runsnack::cli
