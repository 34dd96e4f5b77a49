#pragma once
// Copies bytes both ways between a TCP socket and a mux stream until both
// directions have ended, keeping half-close: end of input on one side (FIN)
// becomes a FIN on the other while the opposite direction keeps flowing.
// An error on either side (reset, session ended) aborts both.
//
// Memory: socket -> stream reads into a kSpliceSmallBytes buffer in its
// coroutine frame, enough for requests, replies and streamed tokens; a sender
// that keeps filling it gets a kSpliceBufferBytes buffer for as long as it
// does. stream -> socket has no buffer of its own: it writes the stream's
// received bytes from where the stream holds them (MuxStream::read_view),
// up to kSpliceBufferBytes per write.
// Optional per-session rate limit (a TokenBucket shared by all of a
// session's connections, both directions) and Host header rewrite of the
// bytes going from the stream to the socket.
// No idle timeout: long-lived idle connections are legitimate; a dead peer
// is noticed by the session's keepalive and ends the stream.
//
// Both `socket` and `stream` must outlive the call; one executor.

#include "core/error.hpp"
#include "net/mux_stream.hpp"
#include "services/forward/host_rewriter.hpp"
#include "services/forward/token_bucket.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace runsnack {

inline constexpr std::size_t kSpliceSmallBytes = 2 * 1024;
inline constexpr std::size_t kSpliceBufferBytes = 256 * 1024;

struct SpliceOptions {
  std::shared_ptr<TokenBucket> bucket;  // null: no limit
  HostRewriter* rewriter = nullptr;     // applied to stream -> socket bytes
};

struct SpliceResult {
  std::uint64_t stream_to_socket = 0;
  std::uint64_t socket_to_stream = 0;
  std::optional<std::string> error;  // why it was aborted; none after a clean close both ways
};

boost::asio::awaitable<SpliceResult> splice(boost::asio::ip::tcp::socket& socket, MuxStream& stream,
                                            const SpliceOptions& options);

}  // namespace runsnack
