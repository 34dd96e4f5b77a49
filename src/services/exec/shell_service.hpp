#pragma once
// The shell service, provider side: an interactive login shell on a pty of
// its own, in the same sandbox, limits, workspace and audit records as `run`
// (exec_service.hpp). The grant must allow "shell". Framed channel
// (fs/frame.hpp) after the stream header:
//
//   shell {"rows":R,"cols":C,"term":T}   header args: the consumer's window and $TERM
//   provider -> {"type":"started","limits":{..}}, then out frames (all the pty's output),
//               {"type":"exit","status":N,"signal":S|null,"reason":".."}, FIN
//   consumer -> in frames (keystrokes, written to the pty as they are: Ctrl-C is
//               the pty's job), {"type":"winsize","rows":R,"cols":C} (TIOCSWINSZ,
//               the shell gets SIGWINCH); its FIN or a lost session kills the shell
//
// Exit status: the shell's, 128+N when killed by signal N.

#include "services/exec/exec_service.hpp"

namespace runsnack::exec {

inline constexpr const char* kServiceShell = "shell";

boost::asio::awaitable<void> serve_shell(std::shared_ptr<MuxStream> stream, nlohmann::json args, ServiceContext context);

}  // namespace runsnack::exec
