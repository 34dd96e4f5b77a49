#include "net/punch.hpp"

#include "net/tcp_tuning.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <sys/socket.h>

namespace runsnack {

namespace asio = boost::asio;
using asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;

Endpoint to_endpoint(const tcp::endpoint& ep) {
  auto addr = ep.address();
  if (addr.is_v6() && addr.to_v6().is_v4_mapped()) addr = asio::ip::make_address_v4(asio::ip::v4_mapped, addr.to_v6());
  return Endpoint{addr.to_string(), ep.port()};
}

Result<tcp::socket> reuse_bound_socket(const asio::any_io_executor& ex, const tcp::endpoint& local) {
  tcp::socket s(ex);
  boost::system::error_code ec;
  s.open(local.protocol(), ec);
  if (!ec) s.set_option(tcp::socket::reuse_address(true), ec);
  if (!ec) {
    int one = 1;
    if (::setsockopt(s.native_handle(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0)
      ec = boost::system::error_code(errno, boost::system::system_category());
  }
  if (!ec) s.bind(local, ec);
  if (ec) return fail(errc::io_error, "bind " + to_endpoint(local).str() + ": " + ec.message());
  return s;
}

asio::awaitable<Result<void>> connect_with_deadline(tcp::socket& socket, tcp::endpoint remote,
                                                    std::chrono::milliseconds timeout) {
  asio::steady_timer timer(co_await asio::this_coro::executor, timeout);
  auto r = co_await (socket.async_connect(remote, asio::as_tuple(asio::use_awaitable)) ||
                     timer.async_wait(asio::as_tuple(asio::use_awaitable)));
  boost::system::error_code ignored;
  if (r.index() == 1) {
    socket.close(ignored);
    co_return fail(errc::timeout, "connect to " + to_endpoint(remote).str() + " timed out");
  }
  if (auto [ec] = std::get<0>(r); ec) {
    socket.close(ignored);
    co_return fail(errc::io_error, "connect to " + to_endpoint(remote).str() + ": " + ec.message());
  }
  socket.set_option(tcp::no_delay(true), ignored);
  co_return Result<void>{};
}

asio::awaitable<Result<tcp::socket>> punch(tcp::endpoint local, tcp::endpoint remote,
                                           std::chrono::steady_clock::time_point start, int attempts) {
  auto ex = co_await asio::this_coro::executor;
  Error last = fail(errc::timeout, "no attempt made");
  for (int k = 0; k < attempts; ++k) {
    asio::steady_timer wait(ex, start + k * kPunchInterval);
    co_await wait.async_wait(asio::as_tuple(asio::use_awaitable));
    auto s = reuse_bound_socket(ex, local);
    if (!s) co_return s.error();
    // The last attempt may wait for one kernel SYN retry; earlier ones end
    // before the next synchronised slot.
    auto budget = k + 1 == attempts ? 2 * kPunchInterval : kPunchInterval - std::chrono::milliseconds(50);
    auto r = co_await connect_with_deadline(*s, remote, budget);
    if (r) co_return std::move(*s);
    last = r.error();
  }
  co_return last;
}

asio::awaitable<Result<tcp::socket>> connect_endpoint(const Endpoint& remote, std::chrono::milliseconds timeout,
                                                      SocketOptions options) {
  auto ex = co_await asio::this_coro::executor;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  tcp::resolver resolver(ex);
  const std::string port = std::to_string(remote.port);
  auto [rerr, results] = co_await resolver.async_resolve(remote.host, port, asio::as_tuple(asio::use_awaitable));
  if (rerr) co_return fail(errc::io_error, "resolve " + remote.host + ": " + rerr.message());
  Error last = fail(errc::io_error, "no address for " + remote.host);
  for (const auto& entry : results) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) co_return fail(errc::timeout, "connect to " + remote.str() + " timed out");
    tcp::socket s(ex);
    if (options.reuse_port) {
      auto local = entry.endpoint().address().is_v4() ? tcp::endpoint(tcp::v4(), 0) : tcp::endpoint(tcp::v6(), 0);
      auto bound = reuse_bound_socket(ex, local);
      if (!bound) co_return bound.error();
      s = std::move(*bound);
    }
    if (options.fast_open) {
      boost::system::error_code ec;
      if (!s.is_open()) s.open(entry.endpoint().protocol(), ec);
      if (ec) co_return fail(errc::io_error, "cannot open a socket: " + ec.message());
      request_fast_open(s);
    }
    auto r = co_await connect_with_deadline(s, entry.endpoint(), left);
    if (r) co_return s;
    last = r.error();
  }
  co_return last;
}

}  // namespace runsnack
