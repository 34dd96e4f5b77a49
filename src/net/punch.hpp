#pragma once
// TCP sockets for NAT traversal (docs/ARCHITECTURE.md section 5.3): sockets bound
// with SO_REUSEADDR + SO_REUSEPORT so that a signaling connection and a
// simultaneous-open attempt share one local port (and so one NAT mapping),
// and connects with a deadline.

#include "core/error.hpp"
#include "link/endpoint.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <chrono>

namespace runsnack {

// An open, unconnected IPv4/IPv6 socket bound to `local` (port 0: any) with
// address and port reuse. errc::io_error when the bind fails.
Result<boost::asio::ip::tcp::socket> reuse_bound_socket(const boost::asio::any_io_executor& ex,
                                                        const boost::asio::ip::tcp::endpoint& local);

// Connects `socket` to `remote`, giving up at `timeout` (errc::timeout) or on
// refusal (errc::io_error). On failure the socket is closed.
boost::asio::awaitable<Result<void>> connect_with_deadline(boost::asio::ip::tcp::socket& socket,
                                                           boost::asio::ip::tcp::endpoint remote,
                                                           std::chrono::milliseconds timeout);

// TCP simultaneous open: from `local` (a port another socket of ours is
// bound to with reuse) to `remote`. Tries in step with the other side:
// attempt k starts at `start + k * kPunchInterval`, `attempts` times.
inline constexpr std::chrono::milliseconds kPunchInterval{1000};  // Linux's first SYN retry is at 1 s
boost::asio::awaitable<Result<boost::asio::ip::tcp::socket>> punch(boost::asio::ip::tcp::endpoint local,
                                                                   boost::asio::ip::tcp::endpoint remote,
                                                                   std::chrono::steady_clock::time_point start,
                                                                   int attempts);

struct SocketOptions {
  bool reuse_port = false;  // bound with SO_REUSEPORT, to keep the NAT mapping a punch uses
  // TCP Fast Open (net/tcp_tuning.hpp): with a cookie the connect completes at once and the first
  // write rides in the SYN, so a refused or unreachable peer shows only at the first read or write
  // (which must have its own deadline).
  bool fast_open = false;
};

// Resolves `remote` and connects (first address that answers), with a deadline.
boost::asio::awaitable<Result<boost::asio::ip::tcp::socket>> connect_endpoint(const Endpoint& remote,
                                                                              std::chrono::milliseconds timeout,
                                                                              SocketOptions options = {});

// "host:port" of an Asio endpoint.
Endpoint to_endpoint(const boost::asio::ip::tcp::endpoint& ep);

}  // namespace runsnack
