#pragma once
// What every consumer command does first: resolve the LINK argument, load this
// installation's identity, connect (dial, pinned TLS, grant proof), then run
// the command's own coroutine with the Session on a one-thread io_context.

#include "session/session.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <functional>
#include <string>

namespace runsnack::cli {

// What a body returns when its session broke and it can carry on in a new
// one (it keeps its own progress, and has told the user in one line); the
// runner reconnects and calls it again.
inline constexpr int kReconnect = -2;

struct SessionCommand {
  std::string link_arg;                        // as the user gave it (see link_arg.hpp)
  std::chrono::milliseconds connect_timeout{10000};
  // How long to keep trying to reconnect after a body returned kReconnect.
  std::chrono::milliseconds reconnect_for{std::chrono::minutes(10)};
  // Called once, when the link and identity are in order, just before the first dial: for work
  // that overlaps the connection (run's scan of the folder it syncs). May be empty.
  std::function<void()> before_connect;
  // The body's first requests follow the grant proof without waiting for its answer (one round
  // trip fewer); a refusal is then the answer to its first stream (ConnectOptions).
  bool pipelined_proof = false;
  // The command that serves the link, for the hint when it cannot be reached (ConnectOptions).
  const char* served_by = "runsnack share";  // a string literal
  // Returns the process exit code; report errors with report() first.
  std::function<boost::asio::awaitable<int>(Session&)> body;
};

// The exit code of `body`, or kExitFailure (with the reason on stderr) when
// the link is bad or the session cannot be set up.
int run_session_command(const SessionCommand& command);

}  // namespace runsnack::cli
