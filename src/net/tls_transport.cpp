// The TLS Transport, in its own file so that only it pulls in Asio.SSL.
#include "net/transport.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>


namespace runsnack {
namespace {

namespace asio = boost::asio;
using TlsSocket = asio::ssl::stream<asio::ip::tcp::socket>;

class TlsTransport final : public Transport {
 public:
  explicit TlsTransport(std::unique_ptr<TlsSocket> stream) : stream_(std::move(stream)) {
    boost::system::error_code ignored;
    stream_->lowest_layer().set_option(asio::ip::tcp::no_delay(true), ignored);
  }
  asio::awaitable<std::size_t> read_some(asio::mutable_buffer buffer) override {
    co_return co_await stream_->async_read_some(buffer, asio::use_awaitable);
  }
  asio::awaitable<void> write(std::span<const asio::const_buffer> buffers) override {
    // ssl::stream encrypts only the first buffer of a sequence per SSL_write,
    // so the Mux's gather write [12-byte header, payload, header, ...] would
    // become one tiny TLS record (and one send) per header. Coalesce into one
    // reused staging buffer so that every record is full.
    std::size_t total = 0;
    for (const auto& b : buffers) total += b.size();
    if (buffers.size() == 1 || total == 0) {
      if (total > 0) co_await asio::async_write(*stream_, buffers, asio::use_awaitable);
      co_return;
    }
    std::size_t i = 0, off = 0;
    while (i < buffers.size()) {
      staging_.clear();
      while (i < buffers.size() && staging_.size() < kStagingBytes) {
        const auto& b = buffers[i];
        std::size_t take = std::min(b.size() - off, kStagingBytes - staging_.size());
        const auto* p = static_cast<const std::uint8_t*>(b.data()) + off;
        staging_.insert(staging_.end(), p, p + take);
        off += take;
        if (off == b.size()) ++i, off = 0;
      }
      co_await asio::async_write(*stream_, asio::buffer(staging_), asio::use_awaitable);
    }
  }
  asio::awaitable<void> shutdown() override {
    using namespace asio::experimental::awaitable_operators;
    if (closed_) co_return;
    // Sends close_notify, then waits for the peer's; a peer that never
    // answers costs at most the timer.
    asio::steady_timer timer(stream_->get_executor(), std::chrono::seconds(1));
    co_await (stream_->async_shutdown(asio::as_tuple(asio::use_awaitable)) ||
              timer.async_wait(asio::as_tuple(asio::use_awaitable)));
  }
  void close() override {
    if (closed_) return;
    closed_ = true;
    boost::system::error_code ignored;
    stream_->lowest_layer().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    stream_->lowest_layer().close(ignored);
  }
  asio::any_io_executor get_executor() override { return stream_->get_executor(); }

 private:
  static constexpr std::size_t kStagingBytes = 256 * 1024;
  std::unique_ptr<TlsSocket> stream_;
  std::vector<std::uint8_t> staging_;
  bool closed_ = false;
};

}  // namespace

std::unique_ptr<Transport> make_tls_transport(std::unique_ptr<TlsSocket> stream) {
  return std::make_unique<TlsTransport>(std::move(stream));
}

}  // namespace runsnack
