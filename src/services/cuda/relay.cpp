#include "services/cuda/relay.hpp"

#include "services/forward/pacing.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <sys/socket.h>

#include <algorithm>

namespace runsnack::cuda {

namespace asio = boost::asio;
using asio::local::stream_protocol;
using namespace asio::experimental::awaitable_operators;

namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

void abort_socket(stream_protocol::socket& socket) {
  boost::system::error_code ignored;
  socket.shutdown(stream_protocol::socket::shutdown_both, ignored);
  socket.cancel(ignored);
}

std::size_t chunk_limit(const RelayOptions& options) {
  if (!options.bucket) return kRelayBufferBytes;
  return std::clamp<std::size_t>(static_cast<std::size_t>(options.bucket->burst()), 1, kRelayBufferBytes);
}

// Ends at the socket's EOF (after sending our FIN) or on an error. With the
// socket leading, its end is the relay's end, so this one must always
// finish: an aborted socket reads as EOF or an error, and a failed stream
// write returns.
asio::awaitable<void> socket_to_stream(stream_protocol::socket& socket, MuxStream& stream,
                                       const RelayOptions& options, RelayResult& result) {
  const std::size_t limit = chunk_limit(options);
  auto buf = std::make_unique_for_overwrite<std::uint8_t[]>(limit);
  for (;;) {
    auto [ec, n] = co_await socket.async_read_some(asio::buffer(buf.get(), limit), kTuple);
    if (ec == asio::error::eof) {
      (void)co_await stream.close_write();
      co_return;
    }
    if (ec) {
      if (!result.error) result.error = "socket: " + ec.message();
      stream.reset();
      co_return;
    }
    co_await pace(options.bucket.get(), n);
    if (auto w = co_await stream.write(asio::buffer(buf.get(), n)); !w) {
      if (!result.error) result.error = "stream: " + w.error().what();
      result.stream_failed = true;
      abort_socket(socket);
      co_return;
    }
    result.socket_to_stream += n;
  }
}

// Ends at the stream's FIN (after shutting the socket's sending side) or on
// an error. With the socket leading it then parks until cancelled, so that
// only the socket side ends the relay.
asio::awaitable<void> stream_to_socket(stream_protocol::socket& socket, MuxStream& stream,
                                       const RelayOptions& options, RelayResult& result) {
  const std::size_t limit = chunk_limit(options);
  auto buf = std::make_unique_for_overwrite<std::uint8_t[]>(limit);
  for (;;) {
    auto n = co_await stream.read_some(asio::buffer(buf.get(), limit));
    if (!n) {
      if (!result.error) result.error = "stream: " + n.error().what();
      result.stream_failed = true;
      abort_socket(socket);
      break;
    }
    if (*n == 0) {
      boost::system::error_code ignored;
      socket.shutdown(stream_protocol::socket::shutdown_send, ignored);
      if (options.on_stream_fin) options.on_stream_fin();
      break;
    }
    co_await pace(options.bucket.get(), *n);
    auto [ec, written] = co_await asio::async_write(socket, asio::buffer(buf.get(), *n), kTuple);
    if (ec) {
      if (!result.error) result.error = "socket: " + ec.message();
      stream.reset();
      abort_socket(socket);
      break;
    }
    result.stream_to_socket += *n;
  }
  if (options.mode == RelayMode::socket_leads) {
    asio::steady_timer park(co_await asio::this_coro::executor, asio::steady_timer::time_point::max());
    co_await park.async_wait(kTuple);
  }
}

}  // namespace

asio::awaitable<RelayResult> relay(stream_protocol::socket& socket, MuxStream& stream, const RelayOptions& options) {
  RelayResult result;
  if (options.mode == RelayMode::socket_leads)
    co_await (socket_to_stream(socket, stream, options, result) || stream_to_socket(socket, stream, options, result));
  else
    co_await (socket_to_stream(socket, stream, options, result) && stream_to_socket(socket, stream, options, result));
  co_return result;
}

void widen_socket_buffers(int fd) {
  const int bytes = 4 * 1024 * 1024;
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

}  // namespace runsnack::cuda
