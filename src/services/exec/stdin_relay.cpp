#include "services/exec/stdin_relay.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fcntl.h>
#include <unistd.h>

namespace runsnack::exec {

namespace asio = boost::asio;

std::uint64_t StdinWindow::open() {
  granted_ = kWindowBytes;
  return kWindowBytes;
}

bool StdinWindow::received(std::uint64_t n) {
  if (n > granted_ - received_) return false;
  received_ += n;
  return true;
}

std::uint64_t StdinWindow::written(std::uint64_t n) {
  written_ += n;
  freed_ += n;
  if (freed_ < kGrantBytes && waiting() > 0) return 0;
  const std::uint64_t grant = freed_;
  freed_ = 0;
  granted_ += grant;
  return grant;
}

std::shared_ptr<StdinRelay> StdinRelay::create(asio::any_io_executor io, fs::UniqueFd pipe) {
  return std::shared_ptr<StdinRelay>(new StdinRelay(std::move(io), std::move(pipe)));
}

StdinRelay::StdinRelay(asio::any_io_executor io, fs::UniqueFd pipe) : pipe_(io), wake_(io) {
  const int fd = pipe.release();
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);  // the io thread never waits on a full pipe
  boost::system::error_code ec;
  pipe_.assign(fd, ec);
  if (ec) {
    ::close(fd);
    stopped_ = true;
  }
}

void StdinRelay::wake() { wake_.cancel(); }

void StdinRelay::take(std::vector<std::uint8_t> bytes) {
  if (stopped_ || end_ || !why_closed_.empty() || bytes.empty()) return;
  if (!window_.received(bytes.size())) {
    why_closed_ = "refused";  // the pipe closes: the command reads end of input
    boost::system::error_code ignored;
    pipe_.cancel(ignored);  // a write in flight ends; its buffer stays queued until run() ends
    wake();
    return;
  }
  queue_.push_back(std::move(bytes));
  wake();
}

void StdinRelay::end() {
  end_ = true;
  wake();
}

void StdinRelay::end_for_reattach() {
  if (end_ || stopped_ || !why_closed_.empty()) return;
  end_ = true;
  why_closed_ = "reattach";
  wake();
}

void StdinRelay::stop() {
  stopped_ = true;
  boost::system::error_code ignored;
  pipe_.cancel(ignored);
  wake();
}

asio::awaitable<void> StdinRelay::run(std::shared_ptr<CommandLink> link) {
  auto self = shared_from_this();  // alive while this runs, whoever else lets go
  auto tok = asio::as_tuple(asio::use_awaitable);
  bool told = !stopped_;
  if (told) {
    const nlohmann::json first = {{"type", "stdin_window"}, {"bytes", window_.open()}};
    told = co_await link->write_control(first);
  }
  while (!stopped_ && told) {
    if (why_closed_ == "refused") break;
    if (!queue_.empty()) {
      const std::vector<std::uint8_t>& front = queue_.front();
      auto [ec, n] = co_await pipe_.async_write_some(asio::buffer(front.data() + front_at_, front.size() - front_at_), tok);
      if (stopped_) break;
      if (ec) {  // EPIPE: nothing reads the command's stdin any more
        if (why_closed_.empty()) why_closed_ = "closed";
        break;
      }
      front_at_ += n;
      if (front_at_ == queue_.front().size()) {
        queue_.pop_front();
        front_at_ = 0;
      }
      if (const std::uint64_t grant = window_.written(n); grant > 0 && !end_) {
        const nlohmann::json more = {{"type", "stdin_window"}, {"bytes", grant}};
        told = co_await link->write_control(more);
      }
      continue;
    }
    if (end_) break;  // all of it is in the pipe
    wake_.expires_at(asio::steady_timer::time_point::max());
    (void)co_await wake_.async_wait(tok);
  }
  boost::system::error_code ignored;
  pipe_.close(ignored);  // the command reads end of input
  queue_.clear();
  if (!stopped_ && told && !why_closed_.empty()) {
    const nlohmann::json closed = {{"type", "stdin_closed"}, {"received", window_.received_total()}, {"why", why_closed_}};
    (void)co_await link->write_control(closed);
  }
}

}  // namespace runsnack::exec
