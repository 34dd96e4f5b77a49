#pragma once
// The TLS-over-TCP stream type that sessions run on, and the deadlines that
// bound every step of setting one up.

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>

#include <chrono>
#include <memory>

namespace runsnack {

using TlsStream = boost::asio::ssl::stream<boost::asio::ip::tcp::socket>;
using TlsStreamPtr = std::unique_ptr<TlsStream>;

// A handshake that has not finished by then is a stalled or hostile peer.
inline constexpr std::chrono::milliseconds kHandshakeTimeout{10000};

}  // namespace runsnack
