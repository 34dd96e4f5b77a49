#include "cli/run_input.hpp"

#include "fs/transfer.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <span>

namespace runsnack::cli {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;

namespace {

// One stdin frame at most: small enough that a signal queued behind it goes out soon after.
constexpr std::size_t kReadBytes = 64 * 1024;

}  // namespace

std::shared_ptr<RunInput> RunInput::create(std::shared_ptr<MuxStream> stream, bool forward_stdin) {
  return std::shared_ptr<RunInput>(new RunInput(std::move(stream), forward_stdin));
}

RunInput::RunInput(std::shared_ptr<MuxStream> stream, bool forward_stdin)
    : stream_(std::move(stream)), forwarding_(forward_stdin) {
  // A descriptor of our own: closing it never closes the user's stdin.
  if (forwarding_) input_fd_ = ::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
  if (input_fd_ < 0) forwarding_ = false;
}

RunInput::~RunInput() {
  if (pollable_) {
    boost::system::error_code ignored;
    pollable_->close(ignored);
  } else if (input_fd_ >= 0) {
    ::close(input_fd_);
  }
}

bool RunInput::stdin_wanted(bool no_stdin) {
  return !no_stdin && ::fcntl(STDIN_FILENO, F_GETFD) != -1 && !::isatty(STDIN_FILENO);
}

void RunInput::wake() {
  if (wake_) wake_->cancel();
}

void RunInput::signal(int sig) {
  signals_.push_back(sig);
  wake();
}

void RunInput::grant(std::uint64_t bytes) {
  credit_ += bytes;
  wake();
}

void RunInput::stdin_closed() {
  closed_ = true;
  wake();
}

void RunInput::stop() {
  stopped_ = true;
  wake();
  if (pollable_) {
    boost::system::error_code ignored;
    pollable_->cancel(ignored);
  }
}

asio::awaitable<std::optional<std::size_t>> RunInput::read_stdin(std::vector<std::uint8_t>& buf) {
  auto tok = asio::as_tuple(asio::use_awaitable);
  if (pollable_) {
    wake_->expires_at(asio::steady_timer::time_point::max());
    auto which = co_await (wake_->async_wait(tok) || pollable_->async_wait(asio::posix::stream_descriptor::wait_read, tok));
    if (which.index() == 0 || stopped_) co_return std::nullopt;
  }
  const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(credit_, buf.size()));
  for (;;) {
    const ssize_t n = ::read(input_fd_, buf.data(), want);
    if (n >= 0) co_return static_cast<std::size_t>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN) co_return std::nullopt;  // another reader took it first
    std::cerr << "runsnack: reading stdin: " << std::strerror(errno) << "; the remote command reads its end there"
              << std::endl;
    co_return 0;
  }
}

asio::awaitable<void> RunInput::run() {
  auto self = shared_from_this();  // alive while this runs
  auto ex = co_await asio::this_coro::executor;
  auto tok = asio::as_tuple(asio::use_awaitable);
  wake_.emplace(ex);
  if (forwarding_) {
    pollable_.emplace(ex);
    boost::system::error_code ec;
    pollable_->assign(input_fd_, ec);  // a regular file or /dev/null: epoll refuses, it is read as it comes
    if (ec) pollable_.reset();
  }
  std::vector<std::uint8_t> buf(kReadBytes);
  while (!stopped_) {
    if (!signals_.empty()) {
      const nlohmann::json msg = {{"type", "signal"}, {"signal", signals_.front()}};
      signals_.pop_front();
      if (!co_await fs::write_control(*stream_, msg)) break;
      continue;
    }
    const bool reading = forwarding_ && !closed_ && !end_sent_;
    if (reading && at_end_) {
      const nlohmann::json end = {{"type", "stdin_end"}};
      if (!co_await fs::write_control(*stream_, end)) break;
      end_sent_ = true;
      continue;
    }
    if (reading && credit_ > 0) {
      auto n = co_await read_stdin(buf);
      if (!n || stopped_ || closed_) continue;
      if (*n == 0) {
        at_end_ = true;
        continue;
      }
      const std::span<const std::uint8_t> chunk(buf.data(), *n);
      if (!co_await fs::write_frame(*stream_, fs::FrameType::in, chunk)) break;
      credit_ -= *n;
      sent_ += *n;
      continue;
    }
    wake_->expires_at(asio::steady_timer::time_point::max());
    (void)co_await wake_->async_wait(tok);
  }
}

}  // namespace runsnack::cli
