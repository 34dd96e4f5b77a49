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
    // ssl::stream encrypts only the first buffer of a sequence per SSL_write
    // (one TLS record, one send per call), so the Mux's gather write
    // [12-byte header, payload, header, ...] would put every header in its
    // own tiny record. Small buffers are coalesced into one reused staging
    // buffer, topped up from the next payload to a full 16 KiB record; the
    // rest of a large payload is written in place (no copy), where asio cuts
    // it into full records.
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      const auto* p = static_cast<const std::uint8_t*>(buffers[i].data());
      std::size_t n = buffers[i].size();
      if (!staging_.empty() || n < kRecordBytes) {
        std::size_t room = kRecordBytes - staging_.size() % kRecordBytes;
        std::size_t take = n < kRecordBytes ? n : std::min(n, room);
        staging_.insert(staging_.end(), p, p + take);
        p += take;
        n -= take;
        // Flush when full, before a large remainder, or at the end.
        if (staging_.size() >= kStagingBytes || n > 0 || i + 1 == buffers.size()) {
          co_await flush_staging();
        }
      }
      if (n > 0) co_await asio::async_write(*stream_, asio::buffer(p, n), asio::use_awaitable);
    }
    if (!staging_.empty()) co_await flush_staging();
  }
  asio::awaitable<void> flush_staging() {
    // On failure the transport is dead anyway; clear so a later call starts clean.
    struct Clear {
      std::vector<std::uint8_t>& v;
      ~Clear() { v.clear(); }
    } clear{staging_};
    co_await asio::async_write(*stream_, asio::buffer(staging_), asio::use_awaitable);
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
  static constexpr std::size_t kRecordBytes = 16 * 1024;  // TLS's maximum plaintext per record
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
