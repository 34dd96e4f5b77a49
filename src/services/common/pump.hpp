#pragma once
// Copies bytes both ways between a socket and a mux stream: the pipe of the
// forward service (a forwarded TCP connection, both halves) and of the cuda
// service (the shim's or the cuda-server's unix socket, both halves). It
// never looks at the bytes, except through the optional rewrite of what goes
// from the stream to the socket (forward's Host header rewrite).
//
// End of input on one side (FIN) becomes a FIN (socket shutdown) on the
// other while the opposite direction keeps flowing. Modes:
//   both_ways     ends when both directions have ended (forward; the cuda
//                 consumer: the program may still read the last replies
//                 after its FIN).
//   socket_leads  ends when the socket side ends (the cuda provider: once
//                 the server has closed its end, nothing more can come or go).
// An error on either side (reset, session ended, socket error) aborts both.
//
// Memory: socket -> stream reads into a kPumpSmallBytes buffer in its
// coroutine frame, enough for requests, replies, streamed tokens and small
// CUDA calls; a sender that keeps filling it gets a `buffer_bytes` buffer
// for as long as it does. stream -> socket has no buffer of its own: it
// writes the stream's received bytes from where the stream holds them
// (MuxStream::read_view), up to `buffer_bytes` per write.
// Optional bandwidth limit: a TokenBucket (one per session, shared by all its
// pumps, both directions: session_limiter.hpp); no piece is larger than its burst.
// No idle timeout: long-lived idle connections are legitimate; a dead peer
// is noticed by the session's keepalive and ends the stream.
//
// `socket`, `stream` and `options` must outlive the call; one executor.

#include "core/error.hpp"
#include "net/mux_stream.hpp"
#include "services/common/token_bucket.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

namespace runsnack {

inline constexpr std::size_t kPumpSmallBytes = 2 * 1024;
inline constexpr std::size_t kPumpBufferBytes = 256 * 1024;

enum class PumpMode { both_ways, socket_leads };

struct PumpOptions {
  PumpMode mode = PumpMode::both_ways;
  std::size_t buffer_bytes = kPumpBufferBytes;  // the most one read or write moves
  std::shared_ptr<TokenBucket> bucket;          // null: no bandwidth limit
  // Applied to stream -> socket bytes: appends to `out` what to send for `in`.
  std::function<void(std::span<const std::uint8_t> in, std::string& out)> rewrite;
  std::function<void()> on_stream_fin;  // called when the stream's FIN has been passed on to the socket
  // Awaited by the stream -> socket direction before it moves a byte, while socket -> stream
  // already flows (the consumer's forward: its client's request follows the stream's header
  // before the provider's answer, which this reads). An error aborts both directions.
  std::function<boost::asio::awaitable<Result<void>>()> before_stream_to_socket;
};

struct PumpResult {
  std::uint64_t stream_to_socket = 0;
  std::uint64_t socket_to_stream = 0;
  bool stream_failed = false;        // the stream was reset or the session ended
  std::optional<std::string> error;  // why it was aborted; none after a clean end
};

template <class Socket>
boost::asio::awaitable<PumpResult> pump(Socket& socket, MuxStream& stream, const PumpOptions& options);

extern template boost::asio::awaitable<PumpResult> pump(boost::asio::ip::tcp::socket&, MuxStream&,
                                                        const PumpOptions&);
extern template boost::asio::awaitable<PumpResult> pump(boost::asio::local::stream_protocol::socket&, MuxStream&,
                                                        const PumpOptions&);

// Larger kernel socket buffers: fewer wake-ups per large copy (the cuda
// service's socket pairs). Best effort.
void widen_socket_buffers(int fd);

}  // namespace runsnack
