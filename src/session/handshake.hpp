#pragma once
// The grant proof on a freshly handshaken TLS stream (see session/auth.hpp for
// the messages). Both halves put a deadline on every read so a stalled peer
// cannot hold a connection slot.

#include "core/error.hpp"
#include "link/grant.hpp"
#include "link/link.hpp"
#include "net/tls_stream.hpp"
#include "session/auth.hpp"

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include <array>
#include <chrono>

namespace runsnack {

// Consumer: sends the proof that it holds `link.secret` over this channel
// (the answer is read later: session/pending_auth.hpp).
boost::asio::awaitable<Result<void>> send_auth_hello(TlsStream& stream, const Link& link);
// Consumer: proves it holds `link.secret` over this channel and reads the
// provider's decision. On refusal the error carries the provider's reason.
// Returns the session id.
boost::asio::awaitable<Result<std::string>> prove_grant(TlsStream& stream, const Link& link,
                                                        std::chrono::milliseconds timeout = kHandshakeTimeout);

// Provider: reads the consumer's hello. errc::closed: the consumer closed the
// connection before sending any of it (as a dial race's loser does).
boost::asio::awaitable<Result<AuthHello>> read_auth_hello(TlsStream& stream,
                                                          std::chrono::milliseconds timeout = kHandshakeTimeout);
boost::asio::awaitable<Result<void>> send_auth_reply(TlsStream& stream, const AuthReply& reply);

// Whether `hello.proof` is the proof for `grant` on this TLS channel.
bool proof_is_valid(const Grant& grant, const AuthHello& hello, std::span<const std::uint8_t> channel_binding);

// Length-prefixed JSON over the TLS stream (session/message.hpp), with a deadline.
boost::asio::awaitable<Result<nlohmann::json>> read_tls_message(TlsStream& stream, std::chrono::milliseconds timeout);
boost::asio::awaitable<Result<void>> write_tls_message(TlsStream& stream, const nlohmann::json& body);

}  // namespace runsnack
