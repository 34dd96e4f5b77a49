#pragma once
// What run, cp and shell share on their streams: the refusal reply, the audit
// record with the session id, and the time limit that holds whether or not the
// consumer reads the output.

#include "core/error.hpp"
#include "net/mux_stream.hpp"
#include "services/exec/exec_service.hpp"
#include "fs/transfer.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace runsnack::exec {

// After the time limit, how long output the consumer does not read may hold the command's end.
inline constexpr std::chrono::seconds kOutputGrace{2};

inline void audit_event(const ExecContext& ctx, const std::string& kind, const std::string& decision,
                        const std::string& reason, nlohmann::json detail) {
  detail["session"] = ctx.session_id;
  if (!ctx.workspace.empty()) detail["workspace"] = ctx.workspace;
  if (ctx.audit) ctx.audit(kind, decision, reason, detail);
}

// {"type":"error","message":...}, then the end of our side of the stream.
inline boost::asio::awaitable<void> refuse(MuxStream& stream, const Error& e) {
  const nlohmann::json msg = {{"type", "error"}, {"message", e.what()}};
  (void)co_await fs::write_control(stream, msg);
  (void)co_await stream.close_write();
}

// The time limit on ctl->deadline (a timer of its own, so it fires whether or not the consumer
// reads): kills the command with `why`; output the consumer does not take within kOutputGrace is
// then dropped with the stream (reset), so that the command is reaped and its resources freed.
// Control: a RunControl or ShellControl (deadline, finished, kill_all).
template <class Control>
boost::asio::awaitable<void> enforce_deadline(std::shared_ptr<MuxStream> stream, std::shared_ptr<Control> ctl,
                                              std::string why) {
  auto timer = ctl->deadline;
  auto tok = boost::asio::as_tuple(boost::asio::use_awaitable);
  if (auto [ec] = co_await timer->async_wait(tok); ec || ctl->finished) co_return;
  ctl->kill_all(why);
  timer->expires_after(kOutputGrace);
  if (auto [ec] = co_await timer->async_wait(tok); ec || ctl->finished) co_return;
  stream->reset();
}

}  // namespace runsnack::exec
