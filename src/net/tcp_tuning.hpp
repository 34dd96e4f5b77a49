#pragma once
// Socket options of session connections: TCP Fast Open, and riding out a path outage.
//
// TCP Fast Open lets a returning consumer's TLS ClientHello ride in its SYN, so a new session
// costs 2 round trips instead of 3. The provider's kernel serves it only where
// net.ipv4.tcp_fastopen has bit 0x2 (`runsnack doctor` says so); elsewhere the options are inert
// and connections are ordinary ones. The SYN's data is a ClientHello, safe to take before the
// handshake completes, and the kernel's cookie ties it to the sender's address, so a spoofed SYN
// gets no reply data.
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
// sooner than the session's keepalive (15-16.25 s) and with a different error;
// TCP_USER_TIMEOUT moves it past the keepalive, which then decides.

#include <boost/asio/ip/tcp.hpp>

namespace runsnack {

// Caps the retransmission backoff of `socket` at 1 s where the kernel allows
// (and then leaves giving up to the session's keepalive). Returns whether it
// did; never throws.
bool cap_retransmit_backoff(boost::asio::ip::tcp::socket& socket);

// A listener that takes data in the SYN from clients holding its cookie (a bounded queue of
// such SYNs not yet accepted). Call before listen(); never throws.
void allow_fast_open(boost::asio::ip::tcp::acceptor& acceptor);

// An open, unconnected socket whose connect() defers to its first write when it holds a cookie
// from an earlier connection (the write goes out in the SYN); without one it asks for one.
// A failed connect then shows as the first read's or write's error. Never throws.
void request_fast_open(boost::asio::ip::tcp::socket& socket);

}  // namespace runsnack
