#pragma once
// Direct dialing: TCP connect + TLS handshake to every candidate address of a
// link at once; the first connection whose handshake pins the expected
// PeerId wins and the others are cancelled (docs/ARCHITECTURE.md section 5.3).
// Later issues add hole punching and relays as further racers.

#include "crypto/peer_id.hpp"
#include "link/link.hpp"
#include "net/tls_stream.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ssl/context.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace runsnack {

struct DialResult {
  TlsStreamPtr stream;
  Endpoint endpoint;                 // the candidate that won
  std::chrono::microseconds elapsed;  // TCP + TLS
  std::string path = "direct";        // "direct", "punched" or "relayed" (net/dial_race.hpp)
};

// Fails with errc::peer_mismatch when some candidate answered with another
// key (and none with the right one), errc::timeout, or errc::io_error with
// each candidate's reason.
boost::asio::awaitable<Result<DialResult>> dial_direct(boost::asio::ssl::context& tls,
                                                       const std::vector<Endpoint>& candidates,
                                                       const PeerId& expected,
                                                       std::chrono::milliseconds timeout);

}  // namespace runsnack
