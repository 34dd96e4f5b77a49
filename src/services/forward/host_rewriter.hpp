#pragma once
// Rewrites the Host header of every HTTP/1.x request a client sends, so that
// servers that check it (Ollama refuses a Host that is not its own) accept
// requests that arrive through a forward. A byte-stream state machine with no
// I/O: feed it what the client sent, send what it returns, in order.
//
//   request  = request-line CRLF *(header CRLF) CRLF body
//   body     = Content-Length bytes | chunked (size[;ext] CRLF data CRLF ... 0 CRLF trailers CRLF) | none
//
// Everything but the Host line passes through byte for byte, bodies as they
// arrive (nothing is held back but one header block or chunk-size line).
// Limits, by design:
//  - only the header block of each request is rewritten; a request without
//    Host gets one; duplicate Host lines all become the target's;
//  - after a request with Upgrade (WebSocket) or CONNECT, the rest of the
//    connection is passed through untouched (a refused upgrade followed by
//    more requests keeps the client's Host);
//  - input that is not HTTP/1.x, a header block over kMaxHeaderBytes or a
//    malformed chunk-size line switches to pass-through for the rest of the
//    connection: the server then judges the bytes itself.

#include <cstdint>
#include <span>
#include <string>

namespace runsnack {

class HostRewriter {
 public:
  static constexpr std::size_t kMaxHeaderBytes = 64 * 1024;
  static constexpr std::size_t kMaxLineBytes = 4096;  // chunk-size and trailer lines

  explicit HostRewriter(std::string host) : host_(std::move(host)) {}

  // Appends to `out` what to send for `in`.
  void feed(std::span<const std::uint8_t> in, std::string& out);

  bool passthrough() const { return state_ == State::tunnel; }
  std::uint64_t requests() const { return requests_; }

 private:
  enum class State { headers, body, chunk_size, chunk_data, chunk_end, trailers, tunnel };
  // Header block complete in head_: rewrite it into `out` and pick the next state.
  void finish_headers(std::string& out);
  void finish_chunk_size(std::string& out);

  std::string host_;
  State state_ = State::headers;
  std::string head_;           // header block, chunk-size or trailer line being collected
  std::uint64_t remaining_ = 0;  // body or chunk bytes still to pass
  std::uint64_t requests_ = 0;
};

}  // namespace runsnack
