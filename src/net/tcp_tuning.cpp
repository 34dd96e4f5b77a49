#include "net/tcp_tuning.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace runsnack {

namespace {
// Not in Debian 12's headers yet (linux/tcp.h of 6.15 and later).
#ifndef TCP_RTO_MAX_MS
constexpr int TCP_RTO_MAX_MS = 44;
#endif
// The smallest cap the kernel accepts: one retransmission a second costs
// nothing during an outage and finds the path again within a second.
constexpr int kRtoMaxMs = 1000;
// Unacknowledged data this long ends the connection: past the Mux keepalive's
// 15-16.25 s (net/yamux_state.hpp), so that the keepalive is what notices.
constexpr unsigned kUserTimeoutMs = 30000;
// SYNs with data not yet accepted, per listener.
constexpr int kFastOpenQueue = 64;
}  // namespace

bool cap_retransmit_backoff(boost::asio::ip::tcp::socket& socket) {
  if (!socket.is_open()) return false;
  const int fd = socket.native_handle();
  const int rto_max = kRtoMaxMs;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_RTO_MAX_MS, &rto_max, sizeof rto_max) != 0) return false;
  const unsigned user_timeout = kUserTimeoutMs;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
  return true;
}

void allow_fast_open(boost::asio::ip::tcp::acceptor& acceptor) {
  const int queue = kFastOpenQueue;
  (void)::setsockopt(acceptor.native_handle(), IPPROTO_TCP, TCP_FASTOPEN, &queue, sizeof queue);
}

void request_fast_open(boost::asio::ip::tcp::socket& socket) {
  const int on = 1;
  (void)::setsockopt(socket.native_handle(), IPPROTO_TCP, TCP_FASTOPEN_CONNECT, &on, sizeof on);
}

}  // namespace runsnack
