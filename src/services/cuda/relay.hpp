#pragma once
// Copies bytes both ways between a unix stream socket and a mux stream: the
// pipe of the "cuda" service. Both halves use it, the consumer between the
// program's CUDA shim and the session, the provider between the session and
// its cuda-server. It never looks at the bytes (the CUDA wire protocol is the
// shim's and the server's business).
//
// Each direction owns one kRelayBufferBytes buffer: CUDA traffic is either
// small calls or large copies, and one read then one write per large chunk
// keeps a copy at the session's speed.
//
// End of input on one side becomes a FIN (socket shutdown) on the other.
// Modes:
//   both_ways     ends when both directions have ended (the consumer: the
//                 program may still read the last replies after its FIN).
//   socket_leads  ends when the socket side ends (the provider: once the
//                 server has closed its end, nothing more can come or go).
// An error on either side (reset, session ended, socket error) aborts both.
//
// `socket`, `stream` and `options` must outlive the call; one executor.

#include "net/mux_stream.hpp"
#include "services/forward/token_bucket.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/local/stream_protocol.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace runsnack::cuda {

inline constexpr std::size_t kRelayBufferBytes = 1024 * 1024;

enum class RelayMode { both_ways, socket_leads };

struct RelayOptions {
  RelayMode mode = RelayMode::both_ways;
  std::shared_ptr<TokenBucket> bucket;  // null: no bandwidth limit
  std::function<void()> on_stream_fin;  // called when the stream's FIN has been passed on to the socket
};

struct RelayResult {
  std::uint64_t socket_to_stream = 0;
  std::uint64_t stream_to_socket = 0;
  bool stream_failed = false;        // the stream was reset or the session ended
  std::optional<std::string> error;  // why it was aborted; none after a clean end
};

boost::asio::awaitable<RelayResult> relay(boost::asio::local::stream_protocol::socket& socket, MuxStream& stream,
                                          const RelayOptions& options);

// Larger socket buffers: fewer wake-ups per large copy. Best effort.
void widen_socket_buffers(int fd);

}  // namespace runsnack::cuda
