#include "services/common/pump.hpp"

#include "services/common/pacing.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <limits>
#include <tuple>

namespace runsnack {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;

namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

// async_write's completion condition: as much per send() as the socket
// takes (transfer_all would cap each at 64 KiB).
std::size_t whole_sends(const boost::system::error_code& ec, std::size_t) {
  return ec ? 0 : std::numeric_limits<std::size_t>::max() / 2;
}

template <class Socket>
void abort_socket(Socket& socket) {
  boost::system::error_code ignored;
  socket.shutdown(Socket::shutdown_both, ignored);
  socket.cancel(ignored);
}

// The most one read or write moves: the buffer, and no more than the bucket's burst.
std::size_t piece_limit(const PumpOptions& options) {
  const std::size_t limit = std::max<std::size_t>(options.buffer_bytes, kPumpSmallBytes);
  if (!options.bucket) return limit;
  return std::clamp<std::size_t>(static_cast<std::size_t>(options.bucket->burst()), 1, limit);
}

// Ends at the socket's EOF (after sending our FIN) or on an error. With the
// socket leading, its end is the pump's end, so this one must always
// finish: an aborted socket reads as EOF or an error, and a failed stream
// write returns.
template <class Socket>
asio::awaitable<void> socket_to_stream(Socket& socket, MuxStream& stream, const PumpOptions& options,
                                       PumpResult& result) {
  // Small messages go through `small`, part of this frame; a read that fills
  // it switches to `big` until reads come back short again. Not zeroed:
  // every byte sent was read into it first.
  std::array<std::uint8_t, kPumpSmallBytes> small;
  std::unique_ptr<std::uint8_t[]> big;
  const std::size_t big_limit = piece_limit(options);
  const std::size_t big_bytes = std::max<std::size_t>(options.buffer_bytes, kPumpSmallBytes);
  for (;;) {
    // A plain read, not a wait for readability then a read: asio re-arms
    // epoll (epoll_ctl) for every wait. The read costs one recv that finds
    // nothing (EAGAIN) after each message before asio parks it on epoll;
    // asio keeps no "drained" state for a short read, only for end of file.
    asio::mutable_buffer target = big ? asio::buffer(big.get(), big_limit) : asio::buffer(small);
    auto [ec, n] = co_await socket.async_read_some(target, kTuple);
    if (ec == asio::error::eof) {
      (void)co_await stream.close_write();  // half-close: the other way keeps flowing
      co_return;
    }
    if (ec) {
      if (!result.error) result.error = "socket: " + ec.message();
      stream.reset();
      co_return;
    }
    co_await pace(options.bucket.get(), n);
    if (auto w = co_await stream.write(asio::buffer(target.data(), n)); !w) {
      if (!result.error) result.error = "stream: " + w.error().what();
      result.stream_failed = true;
      abort_socket(socket);
      co_return;
    }
    result.socket_to_stream += n;
    if (!big && n == small.size()) big = std::make_unique_for_overwrite<std::uint8_t[]>(big_bytes);
    else if (big && n < small.size()) big.reset();  // drained: go idle without holding it
  }
}

// The stream lends its received bytes (read_view) and they are written to
// the socket from where they are, a gather write over the stream's receive
// chunks; consumed (which reopens the window) once the socket took them.
// Ends at the stream's FIN (after shutting the socket's sending side) or on
// an error. With the socket leading it then parks until cancelled, so that
// only the socket side ends the pump.
template <class Socket>
asio::awaitable<void> stream_to_socket(Socket& socket, MuxStream& stream, const PumpOptions& options,
                                       PumpResult& result) {
  if (options.before_stream_to_socket) {
    if (auto ready = co_await options.before_stream_to_socket(); !ready) {
      if (!result.error) result.error = ready.error().what();
      stream.reset();
      abort_socket(socket);
      co_return;
    }
  }
  std::string rewritten;
  const std::size_t limit = piece_limit(options);
  for (;;) {
    auto views = co_await stream.read_view(limit);
    if (!views) {
      if (!result.error) result.error = "stream: " + views.error().what();
      result.stream_failed = true;
      abort_socket(socket);
      break;
    }
    if (views->empty()) {  // the other side's FIN
      boost::system::error_code ignored;
      socket.shutdown(Socket::shutdown_send, ignored);
      if (options.on_stream_fin) options.on_stream_fin();
      break;
    }
    std::size_t n = asio::buffer_size(*views);
    std::size_t out_size = n;
    if (options.rewrite) {
      rewritten.clear();
      for (const auto& v : *views) options.rewrite(std::span(static_cast<const std::uint8_t*>(v.data()), v.size()), rewritten);
      out_size = rewritten.size();
    }
    co_await pace(options.bucket.get(), out_size);
    if (out_size > 0) {
      std::tuple<boost::system::error_code, std::size_t> written;
      if (options.rewrite) written = co_await asio::async_write(socket, asio::buffer(rewritten), whole_sends, kTuple);
      else written = co_await asio::async_write(socket, *views, whole_sends, kTuple);
      if (auto ec = std::get<0>(written)) {
        if (!result.error) result.error = "socket: " + ec.message();
        stream.reset();
        abort_socket(socket);
        break;
      }
    }
    stream.consume(n);
    result.stream_to_socket += n;
    if (rewritten.capacity() > options.buffer_bytes * 2) std::string().swap(rewritten);
  }
  if (options.mode == PumpMode::socket_leads) {
    asio::steady_timer park(co_await asio::this_coro::executor, asio::steady_timer::time_point::max());
    co_await park.async_wait(kTuple);
  }
}

}  // namespace

template <class Socket>
asio::awaitable<PumpResult> pump(Socket& socket, MuxStream& stream, const PumpOptions& options) {
  PumpResult result;
  if (options.mode == PumpMode::socket_leads)
    co_await (socket_to_stream(socket, stream, options, result) || stream_to_socket(socket, stream, options, result));
  else
    co_await (socket_to_stream(socket, stream, options, result) && stream_to_socket(socket, stream, options, result));
  co_return result;
}

template asio::awaitable<PumpResult> pump(asio::ip::tcp::socket&, MuxStream&, const PumpOptions&);
template asio::awaitable<PumpResult> pump(asio::local::stream_protocol::socket&, MuxStream&, const PumpOptions&);

void widen_socket_buffers(int fd) {
  const int bytes = 4 * 1024 * 1024;
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

}  // namespace runsnack
