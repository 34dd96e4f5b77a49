#include "signaling/rdv_io.hpp"

#include "session/message.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <array>
#include <vector>

namespace runsnack::rdv {

namespace asio = boost::asio;
using asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;

namespace {

asio::awaitable<Result<void>> read_exact(tcp::socket& socket, asio::mutable_buffer buf,
                                         std::chrono::steady_clock::time_point deadline) {
  asio::steady_timer timer(co_await asio::this_coro::executor, deadline);
  auto r = co_await (asio::async_read(socket, buf, asio::as_tuple(asio::use_awaitable)) ||
                     timer.async_wait(asio::as_tuple(asio::use_awaitable)));
  if (r.index() == 1) co_return fail(errc::timeout, "rendezvous: read timed out");
  if (auto [ec, n] = std::get<0>(r); ec) co_return fail(errc::closed, "rendezvous: " + ec.message());
  co_return Result<void>{};
}

}  // namespace

asio::awaitable<Result<Message>> read_message(tcp::socket& socket, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::array<std::uint8_t, kMessagePrefixBytes> prefix{};
  if (auto r = co_await read_exact(socket, asio::buffer(prefix), deadline); !r) co_return r.error();
  auto len = decode_message_length(prefix, kMaxRdvMessageBytes);
  if (!len) co_return len.error();
  // Allocated as it arrives: the buffer doubles once what it holds has come.
  std::vector<std::uint8_t> body;
  while (body.size() < *len) {
    std::size_t got = body.size();
    std::size_t step = std::min<std::size_t>(*len - got, std::max<std::size_t>(got, 256));
    body.resize(got + step);
    if (auto r = co_await read_exact(socket, asio::buffer(body.data() + got, step), deadline); !r) co_return r.error();
  }
  co_return decode(body);
}

asio::awaitable<Result<void>> write_frame(tcp::socket& socket, const std::string& frame,
                                          std::chrono::milliseconds timeout) {
  asio::steady_timer timer(co_await asio::this_coro::executor, timeout);
  auto r = co_await (asio::async_write(socket, asio::buffer(frame), asio::as_tuple(asio::use_awaitable)) ||
                     timer.async_wait(asio::as_tuple(asio::use_awaitable)));
  if (r.index() == 1) co_return fail(errc::timeout, "rendezvous: write timed out");
  if (auto [ec, n] = std::get<0>(r); ec) co_return fail(errc::closed, "rendezvous: " + ec.message());
  co_return Result<void>{};
}

asio::awaitable<Result<void>> write_message(tcp::socket& socket, const Message& message,
                                            std::chrono::milliseconds timeout) {
  const std::string frame = encode(message);
  co_return co_await write_frame(socket, frame, timeout);
}

}  // namespace runsnack::rdv
