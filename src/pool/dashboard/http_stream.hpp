#pragma once
// The dashboard's byte stream: plain TCP, or TLS over TCP (`pool serve
// --http-tls CERT KEY`), one type for the HTTP server and both WebSocket
// upgrades (/ws, /worker). The TLS half lives in http_stream.cpp, so this
// header does not pull OpenSSL or asio/ssl into its includers: reads and
// writes go through a type-erased completion handler.
//
// The lowest layer is always a beast::tcp_stream: its expires_after() bounds
// the TLS handshake and every read and write above it, and closing its
// socket ends the stream (what the servers' stop() and timeouts do).
// Threading: one executor; not thread-safe (like the socket it wraps).

#include "core/error.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/beast/core/role.hpp>
#include <boost/beast/core/tcp_stream.hpp>

#include <array>
#include <cstddef>
#include <memory>
#include <string>

namespace runsnack::pool::dashboard {

// A server certificate chain and its private key, loaded and checked once.
class TlsContext;
// Reads CERT (PEM, the leaf first, then any intermediates) and KEY (PEM);
// an unreadable or invalid file, or a key that is not the certificate's, is
// an error naming the file.
Result<std::shared_ptr<TlsContext>> load_tls_context(const std::string& cert_path, const std::string& key_path);

class HttpStream {
 public:
  using executor_type = boost::asio::any_io_executor;
  using Handler = boost::asio::any_completion_handler<void(boost::system::error_code, std::size_t)>;
  using HandshakeHandler = boost::asio::any_completion_handler<void(boost::system::error_code)>;

  explicit HttpStream(boost::beast::tcp_stream tcp);                    // plain
  HttpStream(boost::beast::tcp_stream tcp, const TlsContext& context);  // TLS, server side
  ~HttpStream();
  HttpStream(HttpStream&&) noexcept;
  HttpStream& operator=(HttpStream&&) noexcept;

  bool tls() const;
  executor_type get_executor();
  boost::beast::tcp_stream& next_layer();  // the lowest layer, for get_lowest_layer()
  const boost::beast::tcp_stream& next_layer() const;

  // The TLS server handshake (completes at once for a plain stream), under
  // the tcp_stream's expiry like any read.
  template <class Token>
  auto async_handshake(Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code)>(
        [this](auto handler) { start_handshake(HandshakeHandler(std::move(handler))); }, token);
  }

  template <class MutableBufferSequence, class Token>
  auto async_read_some(const MutableBufferSequence& buffers, Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
        [this](auto handler, const MutableBufferSequence& b) {
          start_read(first_buffer<boost::asio::mutable_buffer>(b), Handler(std::move(handler)));
        },
        token, buffers);
  }

  template <class ConstBufferSequence, class Token>
  auto async_write_some(const ConstBufferSequence& buffers, Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
        [this](auto handler, const ConstBufferSequence& b) {
          WriteBuffers out;
          for (auto it = boost::asio::buffer_sequence_begin(b); it != boost::asio::buffer_sequence_end(b); ++it) {
            if (out.count == out.buffers.size()) break;  // a write may be short: the rest goes next time
            if (boost::asio::const_buffer(*it).size() > 0) out.buffers[out.count++] = *it;
          }
          start_write(out, Handler(std::move(handler)));
        },
        token, buffers);
  }

  // Ends the stream: with TLS a close_notify (so a client can tell the end
  // from a cut), else a shutdown and reading to the peer's end; then the
  // socket closes. At most 5 s. Also the WebSocket's close (teardown below).
  template <class Token>
  auto async_shutdown(Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code)>(
        [this](auto handler) { start_teardown(HandshakeHandler(std::move(handler))); }, token);
  }
  void start_teardown(HandshakeHandler handler);

  struct WriteBuffers {
    std::array<boost::asio::const_buffer, 8> buffers;
    std::size_t count = 0;
  };

 private:
  template <class Buffer, class Sequence>
  static Buffer first_buffer(const Sequence& buffers) {
    for (auto it = boost::asio::buffer_sequence_begin(buffers); it != boost::asio::buffer_sequence_end(buffers); ++it)
      if (Buffer(*it).size() > 0) return Buffer(*it);
    return Buffer();
  }
  void start_handshake(HandshakeHandler handler);
  void start_read(boost::asio::mutable_buffer buffer, Handler handler);
  void start_write(const WriteBuffers& buffers, Handler handler);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Beast's WebSocket closes its stream through these (found by ADL).
void teardown(boost::beast::role_type role, HttpStream& stream, boost::system::error_code& ec);

template <class TeardownHandler>
void async_teardown(boost::beast::role_type, HttpStream& stream, TeardownHandler&& handler) {
  stream.start_teardown(HttpStream::HandshakeHandler(std::forward<TeardownHandler>(handler)));
}

}  // namespace runsnack::pool::dashboard
