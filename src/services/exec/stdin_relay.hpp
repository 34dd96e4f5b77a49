#pragma once
// A run command's stdin, from its consumer into a pipe (run {"mode":"exec"} with "stdin":true,
// exec_service.hpp). The provider grants windows so that what waits here is bounded and the
// stream's reader never waits on the pipe (a signal behind unread input is still read at once):
//
//   provider -> {"type":"stdin_window","bytes":N}   N more bytes may come (the first grant,
//                                                   kWindowBytes, right after "started")
//   consumer -> stdin frames (fs/frame.hpp type 6), never more than granted in all
//   consumer -> {"type":"stdin_end"}                no more: the command reads end of input once
//                                                   the rest is in the pipe
//   provider -> {"type":"stdin_closed","received":N,"why":W}
//               the command takes no more input: W "closed" (it closed its stdin), "refused" (the
//               consumer sent past its window), "reattach" (the session under the command was
//               replaced, detached_commands.hpp: input does not follow; the command reads end of
//               input after the N bytes that arrived). The consumer stops sending.
//
// A command that never reads its stdin fills the pipe and the window; then nothing more travels,
// and its end ends the relay. An older consumer sends no "stdin": the command's stdin is /dev/null.
//
// StdinWindow is the bookkeeping (no I/O, stepped by its tests); StdinRelay does the writes on
// the io thread (non-blocking pipe). One thread: the provider's io_context.

#include "fs/safe_fs.hpp"
#include "services/exec/detached_commands.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace runsnack::exec {

class StdinWindow {
 public:
  // What may wait on the provider for the pipe: about a pipe's worth and a frame.
  static constexpr std::uint64_t kWindowBytes = 256 * 1024;
  // Room is granted back once this much was written (or all that came): fewer, larger grants.
  static constexpr std::uint64_t kGrantBytes = 64 * 1024;

  // The first grant.
  std::uint64_t open();
  // `n` bytes arrived; false when they go past what was granted (the consumer's mistake).
  bool received(std::uint64_t n);
  // `n` of them went into the pipe: the grant to send now, 0 for none yet.
  std::uint64_t written(std::uint64_t n);
  std::uint64_t waiting() const { return received_ - written_; }
  std::uint64_t received_total() const { return received_; }

 private:
  std::uint64_t granted_ = 0, received_ = 0, written_ = 0, freed_ = 0;
};

class StdinRelay : public std::enable_shared_from_this<StdinRelay> {
 public:
  // `pipe`: the write end of the command's stdin.
  static std::shared_ptr<StdinRelay> create(boost::asio::any_io_executor io, fs::UniqueFd pipe);
  StdinRelay(const StdinRelay&) = delete;
  StdinRelay& operator=(const StdinRelay&) = delete;

  // From the stream's reader: a stdin frame's bytes, and {"type":"stdin_end"}.
  void take(std::vector<std::uint8_t> bytes);
  void end();
  // The session under the command was replaced: what came is written, then the end.
  void end_for_reattach();
  // The command ended: the pipe closes, nothing more is said.
  void stop();

  // The writer: the first grant, the pipe writes and the grants that follow, the end, and
  // "stdin_closed" when the input stops early. Returns once the pipe is closed.
  boost::asio::awaitable<void> run(std::shared_ptr<CommandLink> link);

 private:
  StdinRelay(boost::asio::any_io_executor io, fs::UniqueFd pipe);
  void wake();

  boost::asio::posix::stream_descriptor pipe_;
  boost::asio::steady_timer wake_;
  StdinWindow window_;
  std::deque<std::vector<std::uint8_t>> queue_;
  std::size_t front_at_ = 0;  // of queue_.front(), written already
  bool end_ = false, stopped_ = false;
  std::string why_closed_;  // set when the input stops before its end: told to the consumer
};

}  // namespace runsnack::exec
