#pragma once
// What `run` (cmd_run.cpp) sends on its exec stream while the command runs: Ctrl-C as signals
// and, when asked, this process's stdin within the windows the provider grants, then its end
// (services/exec/stdin_relay.hpp has the protocol). The stream's one writer: the frames of both
// go out from here, one at a time.
//
// stdin is read only while the provider has room for it, so a command that does not read its
// input holds at most a window of it; a stdin that never ends holds nothing up (stop() ends the
// writer when the command ends). stdin is read through a descriptor of its own (a dup): one that
// epoll cannot watch (a regular file, /dev/null) is read as it comes, never waited for.

#include "net/mux_stream.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

namespace runsnack::cli {

class RunInput : public std::enable_shared_from_this<RunInput> {
 public:
  // With `forward_stdin`, fd 0 is sent (the exec request carries "stdin": true).
  static std::shared_ptr<RunInput> create(std::shared_ptr<MuxStream> stream, bool forward_stdin);
  ~RunInput();
  RunInput(const RunInput&) = delete;
  RunInput& operator=(const RunInput&) = delete;

  // Whether stdin is forwarded: not a terminal (that stays with the user, as before), and open.
  static bool stdin_wanted(bool no_stdin);

  // {"type":"signal","signal":sig}, after what is being written now.
  void signal(int sig);
  // The provider's {"type":"stdin_window"}: `bytes` more may go.
  void grant(std::uint64_t bytes);
  // The provider's {"type":"stdin_closed"}: no more stdin goes.
  void stdin_closed();
  // The command ended (or its stream did): the writer returns without another write.
  void stop();

  std::uint64_t stdin_sent() const { return sent_; }
  bool stdin_ended() const { return end_sent_; }

  // The writer; returns after stop(), or when a write fails.
  boost::asio::awaitable<void> run();

 private:
  RunInput(std::shared_ptr<MuxStream> stream, bool forward_stdin);
  void wake();
  // Reads what stdin has now (at most the credit), waiting for it when it can be waited for:
  // 0 at its end; nothing when woken first.
  boost::asio::awaitable<std::optional<std::size_t>> read_stdin(std::vector<std::uint8_t>& buf);

  std::shared_ptr<MuxStream> stream_;
  bool forwarding_;
  int input_fd_ = -1;                                                    // the dup of fd 0
  std::optional<boost::asio::posix::stream_descriptor> pollable_;  // input_fd_, when epoll takes it
  std::optional<boost::asio::steady_timer> wake_;
  std::deque<int> signals_;
  std::uint64_t credit_ = 0, sent_ = 0;
  bool at_end_ = false, end_sent_ = false, closed_ = false, stopped_ = false;
};

}  // namespace runsnack::cli
