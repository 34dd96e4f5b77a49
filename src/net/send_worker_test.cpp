// SendWorker on a real loopback TCP pair: order, a peer that stops reading,
// a peer that resets the connection.
#include "net/send_worker.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <gtest/gtest.h>

#include <optional>
#include <vector>

namespace runsnack {
namespace {

namespace asio = boost::asio;
using asio::awaitable;
using asio::ip::tcp;
using namespace std::chrono_literals;

struct Pair {
  tcp::socket sender, receiver;
  explicit Pair(asio::io_context& io) : sender(io), receiver(io) {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    sender.connect(acceptor.local_endpoint());
    receiver = acceptor.accept();
    sender.non_blocking(true);
  }
};

std::vector<std::uint8_t> batch(std::size_t n, std::size_t index) {
  std::vector<std::uint8_t> b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>(i * 13 + index);
  return b;
}

// What wait_below throws, if anything.
awaitable<void> wait(SendWorker& w, std::size_t n, std::optional<boost::system::error_code>& error) {
  try {
    co_await w.wait_below(n);
  } catch (const boost::system::system_error& e) {
    error = e.code();
  }
}

TEST(SendWorker, SendsBatchesInOrderAndRecyclesThem) {
  asio::io_context io;
  Pair pair(io);
  SendWorker worker(pair.sender.native_handle(), io.get_executor());
  constexpr std::size_t kBatches = 40, kBytes = 300 * 1024 + 7;
  bool sent = false, received = false, exact = true, recycled = false;
  asio::co_spawn(io, [&]() -> awaitable<void> {
    for (std::size_t i = 0; i < kBatches; ++i) {
      co_await worker.wait_below(2);  // at most two queued, as the TLS transport does
      auto spare = worker.take_spare();
      recycled |= spare.capacity() >= kBytes;
      EXPECT_TRUE(spare.empty());
      worker.push(batch(kBytes, i));
    }
    co_await worker.wait_below(1);
    EXPECT_EQ(worker.in_flight(), 0u);
    worker.release_spares();
    EXPECT_EQ(worker.take_spare().capacity(), 0u);
    sent = true;
  }, [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
  asio::co_spawn(io, [&]() -> awaitable<void> {
    std::vector<std::uint8_t> got(kBytes);
    for (std::size_t i = 0; i < kBatches; ++i) {
      co_await asio::async_read(pair.receiver, asio::buffer(got), asio::use_awaitable);
      exact &= got == batch(kBytes, i);
    }
    received = true;
  }, [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
  io.run_for(30s);
  EXPECT_TRUE(sent);
  EXPECT_TRUE(received);
  EXPECT_TRUE(exact);
  EXPECT_TRUE(recycled);
}

TEST(SendWorker, StopEndsASendBlockedOnAPeerThatDoesNotRead) {
  asio::io_context io;
  Pair pair(io);
  SendWorker worker(pair.sender.native_handle(), io.get_executor());
  // Far more than the socket buffers hold: the worker blocks on the first batches.
  for (std::size_t i = 0; i < 8; ++i) worker.push(batch(8 * 1024 * 1024, i));
  std::optional<boost::system::error_code> error;
  bool done = false;
  asio::co_spawn(io, [&]() -> awaitable<void> {
    co_await wait(worker, 1, error);
    done = true;
  }, [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
  io.run_for(200ms);  // the worker is stuck now; the waiter too
  EXPECT_FALSE(done);
  EXPECT_GT(worker.in_flight(), 0u);
  worker.stop();
  io.restart();
  io.run_for(10s);
  EXPECT_TRUE(done);
  ASSERT_TRUE(error.has_value());
  // After stop(), every wait fails at once.
  std::optional<boost::system::error_code> again;
  asio::co_spawn(io, wait(worker, 100, again), [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
  io.restart();
  io.run_for(10s);
  EXPECT_TRUE(again.has_value());
}

TEST(SendWorker, ReportsAPeerResetAsASendError) {
  asio::io_context io;
  Pair pair(io);
  SendWorker worker(pair.sender.native_handle(), io.get_executor());
  pair.receiver.set_option(asio::socket_base::linger(true, 0));
  pair.receiver.close();  // RST
  std::optional<boost::system::error_code> error;
  asio::co_spawn(io, [&]() -> awaitable<void> {
    // The first sends may land before the RST is seen; keep sending until one fails.
    for (std::size_t i = 0; i < 64 && !error; ++i) {
      worker.push(batch(256 * 1024, i));
      co_await wait(worker, 1, error);
    }
  }, [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
  io.run_for(30s);
  ASSERT_TRUE(error.has_value());
  EXPECT_NE(*error, asio::error::operation_aborted) << error->message();
}

}  // namespace
}  // namespace runsnack
