#include "services/forward/splice.hpp"

#include "services/forward/pacing.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <array>
#include <span>

namespace runsnack {

namespace asio = boost::asio;
using asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;

namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

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
    // epoll (epoll_ctl) for every wait, while after a short read it parks
    // the next read until epoll says there is more, at no syscall.
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

asio::awaitable<void> stream_to_socket(tcp::socket& socket, MuxStream& stream, const SpliceOptions& options,
                                       SpliceResult& result) {
  std::array<std::uint8_t, kSpliceSmallBytes> small;
  std::unique_ptr<std::uint8_t[]> big;  // while a fast sender keeps filling `small`
  std::string rewritten;
  std::size_t big_limit = kSpliceBufferBytes;
  if (options.bucket) big_limit = std::min<std::size_t>(big_limit, static_cast<std::size_t>(options.bucket->burst()));
  for (;;) {
    asio::mutable_buffer target = big ? asio::buffer(big.get(), big_limit) : asio::buffer(small);
    auto n = co_await stream.read_some(target);
    if (!n) {
      if (!result.error) result.error = "stream: " + n.error().what();
      abort_socket(socket);
      co_return;
    }
    if (*n == 0) {  // the other side's FIN
      boost::system::error_code ignored;
      socket.shutdown(tcp::socket::shutdown_send, ignored);
      co_return;
    }
    asio::const_buffer out(target.data(), *n);
    if (options.rewriter) {
      rewritten.clear();
      options.rewriter->feed(std::span(static_cast<const std::uint8_t*>(target.data()), *n), rewritten);
      out = asio::buffer(rewritten);
    }
    co_await pace(options.bucket.get(), out.size());
    if (out.size() > 0) {
      auto [ec, written] = co_await asio::async_write(socket, out, kTuple);
      if (ec) {
        if (!result.error) result.error = "socket: " + ec.message();
        stream.reset();
        abort_socket(socket);
        co_return;
      }
    }
    result.stream_to_socket += *n;
    if (!big && *n == small.size()) big = std::make_unique_for_overwrite<std::uint8_t[]>(kSpliceBufferBytes);
    else if (big && *n < small.size()) big.reset();
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
