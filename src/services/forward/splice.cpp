#include "services/forward/splice.hpp"

#include "services/forward/pacing.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <array>
#include <limits>
#include <tuple>
#include <span>

namespace runsnack {

namespace asio = boost::asio;
using asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;

namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

// async_write's completion condition: as much per send() as the socket
// takes (transfer_all would cap each at 64 KiB).
std::size_t whole_sends(const boost::system::error_code& ec, std::size_t) {
  return ec ? 0 : std::numeric_limits<std::size_t>::max() / 2;
}

void abort_socket(tcp::socket& socket) {
  boost::system::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_both, ignored);
  socket.cancel(ignored);
}

asio::awaitable<void> socket_to_stream(tcp::socket& socket, MuxStream& stream, const SpliceOptions& options,
                                       SpliceResult& result) {
  // Small messages (requests, replies, tokens) go through `small`, part of
  // this frame; a read that fills it switches to `big` until reads come
  // back short again. Not zeroed: every byte sent was read into it first.
  std::array<std::uint8_t, kSpliceSmallBytes> small;
  std::unique_ptr<std::uint8_t[]> big;
  std::size_t big_limit = kSpliceBufferBytes;
  if (options.bucket) big_limit = std::min<std::size_t>(big_limit, static_cast<std::size_t>(options.bucket->burst()));
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
      abort_socket(socket);
      co_return;
    }
    result.socket_to_stream += n;
    if (!big && n == small.size()) big = std::make_unique_for_overwrite<std::uint8_t[]>(kSpliceBufferBytes);
    else if (big && n < small.size()) big.reset();  // drained: go idle without holding it
  }
}

// The stream lends its received bytes (read_view) and they are written to
// the socket from where they are, a gather write over the stream's receive
// chunks; consumed (which reopens the window) once the socket took them.
asio::awaitable<void> stream_to_socket(tcp::socket& socket, MuxStream& stream, const SpliceOptions& options,
                                       SpliceResult& result) {
  std::string rewritten;
  std::size_t limit = kSpliceBufferBytes;
  if (options.bucket) limit = std::min<std::size_t>(limit, static_cast<std::size_t>(options.bucket->burst()));
  for (;;) {
    auto views = co_await stream.read_view(limit);
    if (!views) {
      if (!result.error) result.error = "stream: " + views.error().what();
      abort_socket(socket);
      co_return;
    }
    if (views->empty()) {  // the other side's FIN
      boost::system::error_code ignored;
      socket.shutdown(tcp::socket::shutdown_send, ignored);
      co_return;
    }
    std::size_t n = asio::buffer_size(*views);
    std::size_t out_size = n;
    if (options.rewriter) {
      rewritten.clear();
      for (const auto& v : *views)
        options.rewriter->feed(std::span(static_cast<const std::uint8_t*>(v.data()), v.size()), rewritten);
      out_size = rewritten.size();
    }
    co_await pace(options.bucket.get(), out_size);
    if (out_size > 0) {
      std::tuple<boost::system::error_code, std::size_t> written;
      if (options.rewriter) written = co_await asio::async_write(socket, asio::buffer(rewritten), whole_sends, kTuple);
      else written = co_await asio::async_write(socket, *views, whole_sends, kTuple);
      if (auto ec = std::get<0>(written)) {
        if (!result.error) result.error = "socket: " + ec.message();
        stream.reset();
        abort_socket(socket);
        co_return;
      }
    }
    stream.consume(n);
    result.stream_to_socket += n;
    if (rewritten.capacity() > kSpliceBufferBytes * 2) std::string().swap(rewritten);
  }
}

}  // namespace

asio::awaitable<SpliceResult> splice(tcp::socket& socket, MuxStream& stream, const SpliceOptions& options) {
  SpliceResult result;
  co_await (socket_to_stream(socket, stream, options, result) && stream_to_socket(socket, stream, options, result));
  co_return result;
}

}  // namespace runsnack
