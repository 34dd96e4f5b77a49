#pragma once
// Socket options for session connections that should ride out a path outage.
//
// After a blackhole Linux backs TCP retransmissions off exponentially (RTO
// doubling up to 120 s): when a 10 s outage ends, the next retransmission may
// come 2-8 s later, and the session sits idle all that time although the
// path is back. Capping the backoff at 1 s (TCP_RTO_MAX_MS, Linux >= 6.15)
// makes a session resume within about a second. Older kernels refuse the
// option; the session then resumes when their backoff says (still resumes).
//
// With the cap, TCP's own give-up (tcp_retries2 retransmissions, modelled on
// the capped backoff) would end a connection after ~13 s without an answer,
// sooner than the session's keepalive (15-17.5 s) and with a different error;
// TCP_USER_TIMEOUT moves it past the keepalive, which then decides.

#include <boost/asio/ip/tcp.hpp>

namespace runsnack {

// Caps the retransmission backoff of `socket` at 1 s where the kernel allows
// (and then leaves giving up to the session's keepalive). Returns whether it
// did; never throws.
bool cap_retransmit_backoff(boost::asio::ip::tcp::socket& socket);

}  // namespace runsnack
