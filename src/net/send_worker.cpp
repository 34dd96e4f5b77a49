#include "net/send_worker.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <cerrno>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

namespace runsnack {

namespace asio = boost::asio;

SendWorker::SendWorker(int fd, asio::any_io_executor executor) : fd_(fd), done_(std::move(executor), 1) {
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) throw boost::system::system_error(errno, boost::system::system_category(), "send worker: eventfd");
  thread_ = std::thread([this] { run(); });
}

SendWorker::~SendWorker() {
  stop();
  ::close(wake_fd_);
}

std::size_t SendWorker::in_flight() {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

void SendWorker::push(std::vector<std::uint8_t> batch) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(batch));
  }
  cv_.notify_one();
}

std::vector<std::uint8_t> SendWorker::take_spare() {
  std::lock_guard lock(mutex_);
  if (spare_.empty()) return {};
  auto spare = std::move(spare_.back());
  spare_.pop_back();
  return spare;
}

void SendWorker::release_spares() {
  std::vector<std::vector<std::uint8_t>> spares;
  {
    std::lock_guard lock(mutex_);
    spares.swap(spare_);
  }  // freed outside the lock
}

asio::awaitable<void> SendWorker::wait_below(std::size_t n) {
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (error_) throw boost::system::system_error(error_, "tls: send failed");
      if (stopping_) throw boost::system::system_error(asio::error::operation_aborted, "tls: send failed");
      if (queue_.size() < n) co_return;
    }
    // A batch finishing after the check above leaves its message in done_;
    // stop() cancels the wait. Either way the state above says what happened.
    co_await done_.async_receive(asio::as_tuple(asio::use_awaitable));
  }
}

void SendWorker::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_one();
  std::uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
  thread_.join();
  done_.cancel();  // a waiting wait_below() wakes and throws
}

void SendWorker::run() {
  for (;;) {
    const std::vector<std::uint8_t>* batch = nullptr;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      batch = &queue_.front();  // deque: push_back keeps references valid
    }
    boost::system::error_code ec = send_all(batch->data(), batch->size());
    {
      std::lock_guard lock(mutex_);
      if (ec) {
        error_ = ec;
      } else {
        queue_.front().clear();
        spare_.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    done_.try_send(ec);
    if (ec) return;
  }
}

boost::system::error_code SendWorker::send_all(const std::uint8_t* p, std::size_t n) {
  while (n > 0) {
    ssize_t sent = ::send(fd_, p, n, MSG_NOSIGNAL);
    if (sent > 0) {
      p += sent;
      n -= static_cast<std::size_t>(sent);
      continue;
    }
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
      return boost::system::error_code(errno, boost::system::system_category());
    // The socket buffer is full: wait for room, or for stop().
    pollfd fds[2] = {{fd_, POLLOUT, 0}, {wake_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR)
      return boost::system::error_code(errno, boost::system::system_category());
    if (fds[1].revents != 0) return asio::error::operation_aborted;
  }
  return {};
}

}  // namespace runsnack
