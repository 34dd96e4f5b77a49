#pragma once
// SendWorker: sends batches of bytes on a socket from a thread of its own, in
// order. The TLS transport hands it a batch of ciphertext and encrypts the
// next one on the io thread meanwhile: on two cores, AES-GCM and the send
// syscall (which on loopback also runs the receiver's TCP input) overlap.
//
// Threads: push/take_spare/in_flight/wait_below/stop are for the io thread
// (the executor given); only the worker thread calls ::send on the socket while
// batches are in flight, so the io thread sends directly only when in_flight()
// is 0. A send error ends the worker: it is thrown by the next wait_below().

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/concurrent_channel.hpp>
#include <boost/system/error_code.hpp>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace runsnack {

class SendWorker {
 public:
  // `fd`: a connected non-blocking stream socket, open until stop() returns.
  SendWorker(int fd, boost::asio::any_io_executor executor);
  SendWorker(const SendWorker&) = delete;
  SendWorker& operator=(const SendWorker&) = delete;
  ~SendWorker();  // stop()

  // Batches queued or being sent.
  std::size_t in_flight();
  // Queues a non-empty batch behind the others.
  void push(std::vector<std::uint8_t> batch);
  // The storage of a batch already sent, emptied (capacity kept), or an empty vector.
  std::vector<std::uint8_t> take_spare();
  // Frees the storage of sent batches.
  void release_spares();
  // Waits until fewer than `n` batches (n >= 1) are in flight. Throws
  // boost::system::system_error on a send error or after stop().
  boost::asio::awaitable<void> wait_below(std::size_t n);
  // Ends the thread now (a batch being sent is abandoned) and joins it; a
  // waiting wait_below() throws. Idempotent.
  void stop();

 private:
  void run();
  // Sends all of [p, p+n), waiting for room; fails when stop() is called.
  boost::system::error_code send_all(const std::uint8_t* p, std::size_t n);

  int fd_;
  int wake_fd_ = -1;  // eventfd: stop() interrupts a poll() for room
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::vector<std::uint8_t>> queue_;  // front: the batch being sent
  std::vector<std::vector<std::uint8_t>> spare_;
  boost::system::error_code error_;
  bool stopping_ = false;
  // The worker's "a batch is done" signal to the io thread; one buffered
  // message is enough, as the waiter looks at the queue again after it.
  boost::asio::experimental::concurrent_channel<void(boost::system::error_code)> done_;
  std::thread thread_;
};

}  // namespace runsnack
