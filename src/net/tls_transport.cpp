// The TLS Transport, in its own file so that only it pulls in Asio.SSL.
//
// asio::ssl::stream does the handshake and the session's auth exchange; then
// make_tls_transport takes the SSL* and the socket out of it and runs the
// data path itself. asio's engine moves ciphertext through a 17 KiB BIO pair:
// one TLS record per send()/recv(), two extra copies per record. Here the SSL
// gets a BIO over two buffers of ours instead:
//
//   write: plaintext --SSL_write_ex--> tx_pending_ (up to 768 KiB of records) --one send()--> socket
//   read:  socket --async_read_some (up to 1 MiB)--> rx_ --SSL_read_ex--> caller's buffer
//
// OpenSSL handles post-handshake messages (KeyUpdate) inside SSL_read/SSL_write;
// whatever it writes meanwhile lands in tx_pending_ and is flushed in order.
#include "net/transport.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/system/system_error.hpp>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace runsnack {

namespace asio = boost::asio;
using TlsSocket = asio::ssl::stream<asio::ip::tcp::socket>;

// asio keeps ciphertext it has read but not yet fed to OpenSSL in
// stream_core::input_, a private member with no accessor. Access checks do not
// apply to the arguments of an explicit instantiation, which is how this names it.
using CoreMember = asio::ssl::detail::stream_core TlsSocket::*;
CoreMember stream_core_member();
template <CoreMember Member>
struct StreamCoreAccess {
  friend CoreMember stream_core_member() { return Member; }
};
template struct StreamCoreAccess<&TlsSocket::core_>;

namespace {

constexpr std::size_t kRecordBytes = 16 * 1024;  // TLS's maximum plaintext per record

// ------------------------------------------------------------ asio fallback

// The asio::ssl::stream data path, for the case the handover is not possible
// (see make_tls_transport). One record per send and recv.
class AsioTlsTransport final : public Transport {
 public:
  explicit AsioTlsTransport(std::unique_ptr<TlsSocket> stream) : stream_(std::move(stream)) {
    boost::system::error_code ignored;
    stream_->lowest_layer().set_option(asio::ip::tcp::no_delay(true), ignored);
  }
  asio::awaitable<std::size_t> read_some(asio::mutable_buffer buffer) override {
    co_return co_await stream_->async_read_some(buffer, asio::use_awaitable);
  }
  asio::awaitable<void> write(std::span<const asio::const_buffer> buffers) override {
    // ssl::stream encrypts only the first buffer of a sequence per SSL_write:
    // coalesce small buffers so that headers do not get records of their own.
    std::vector<std::uint8_t> staging;
    for (const auto& b : buffers) {
      const auto* p = static_cast<const std::uint8_t*>(b.data());
      if (b.size() < kRecordBytes) {
        staging.insert(staging.end(), p, p + b.size());
        continue;
      }
      if (!staging.empty()) co_await asio::async_write(*stream_, asio::buffer(staging), asio::use_awaitable);
      staging.clear();
      co_await asio::async_write(*stream_, b, asio::use_awaitable);
    }
    if (!staging.empty()) co_await asio::async_write(*stream_, asio::buffer(staging), asio::use_awaitable);
  }
  asio::awaitable<void> shutdown(PeerWait wait) override {
    using namespace asio::experimental::awaitable_operators;
    if (closed_) co_return;
    if (wait == PeerWait::none) {  // asio's shutdown always waits: FIN only
      boost::system::error_code ignored;
      stream_->lowest_layer().shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
      co_return;
    }
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
  void abandon() override {
    boost::system::error_code ignored;
    stream_->lowest_layer().cancel(ignored);
  }
  asio::any_io_executor get_executor() override { return stream_->get_executor(); }

 private:
  std::unique_ptr<TlsSocket> stream_;
  bool closed_ = false;
};

// ------------------------------------------------------------ the SSL's BIO

// What the BIO reads from and writes to; owned by the transport, which frees
// the SSL (and with it the BIO) before these.
struct BioBuffers {
  std::unique_ptr<std::uint8_t[]> rx;  // ciphertext from the socket
  std::size_t rx_size = 0, rx_begin = 0, rx_end = 0;
  std::vector<std::uint8_t> tx_pending;  // ciphertext not yet handed to a send
};

int bio_write(BIO* bio, const char* data, int len) {
  auto* io = static_cast<BioBuffers*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  if (len <= 0) return 0;
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(data);
  io->tx_pending.insert(io->tx_pending.end(), bytes, bytes + len);  // never blocks
  return len;
}

// OpenSSL asks for a record's header, then its body, and gets exactly that.
// (Read-ahead into a large OpenSSL buffer straight from the socket would save
// this copy, but OpenSSL then memmoves the buffered rest at every record start
// to align the payload: quadratic in the buffer size.)
int bio_read(BIO* bio, char* out, int len) {
  auto* io = static_cast<BioBuffers*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  std::size_t available = io->rx_end - io->rx_begin;
  if (available == 0) {
    BIO_set_retry_read(bio);  // SSL_ERROR_WANT_READ: the transport reads the socket
    return -1;
  }
  std::size_t n = std::min(available, static_cast<std::size_t>(std::max(len, 0)));
  std::memcpy(out, io->rx.get() + io->rx_begin, n);
  io->rx_begin += n;
  return static_cast<int>(n);
}

long bio_ctrl(BIO* bio, int cmd, long, void*) {
  auto* io = static_cast<BioBuffers*>(BIO_get_data(bio));
  switch (cmd) {
    case BIO_CTRL_FLUSH:
      return 1;
    case BIO_CTRL_PENDING:
      return static_cast<long>(io->rx_end - io->rx_begin);
    case BIO_CTRL_WPENDING:
      return static_cast<long>(io->tx_pending.size());
    default:
      return 0;
  }
}

const BIO_METHOD* buffers_bio_method() {
  static const BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "runsnack transport buffers");
    if (m == nullptr || BIO_meth_set_write(m, bio_write) != 1 || BIO_meth_set_read(m, bio_read) != 1 ||
        BIO_meth_set_ctrl(m, bio_ctrl) != 1) {
      BIO_meth_free(m);
      return static_cast<BIO_METHOD*>(nullptr);
    }
    return m;
  }();
  return method;
}

// async_write's completion condition: the whole buffer in one send() if the
// socket takes it (transfer_all caps each send at 64 KiB).
std::size_t whole_sends(const boost::system::error_code& ec, std::size_t) {
  return ec ? 0 : std::numeric_limits<std::size_t>::max() / 2;
}

boost::system::system_error ssl_failure(const char* what) {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  // Without a queued error OpenSSL failed for want of a syscall, which a
  // memory BIO never makes: report it as a protocol error.
  boost::system::error_code ec = e != 0 ? boost::system::error_code(static_cast<int>(e), asio::error::get_ssl_category())
                                        : boost::system::error_code(asio::ssl::error::unexpected_result);
  return boost::system::system_error(ec, what);
}

// ------------------------------------------------------------ the transport

class TlsTransport final : public Transport {
 public:
  // Takes one reference to `ssl`, whose handshake is complete; installs its own BIO.
  TlsTransport(asio::ip::tcp::socket socket, SSL* ssl, BIO* bio, std::unique_ptr<BioBuffers> io)
      : io_(std::move(io)),
        ssl_(ssl),
        socket_(std::move(socket)),
        send_done_(socket_.get_executor()),
        read_done_(socket_.get_executor()) {
    boost::system::error_code ignored;
    socket_.set_option(asio::ip::tcp::no_delay(true), ignored);  // we send whole batches
    send_done_.expires_at(asio::steady_timer::time_point::max());
    read_done_.expires_at(asio::steady_timer::time_point::max());
    BIO_set_data(bio, io_.get());
    BIO_set_init(bio, 1);
    SSL_set_bio(ssl, bio, bio);  // frees asio's BIO-pair end; one reference to `bio` for both
    // SSL_write_ex writes everything in one call (the BIO never blocks), not one record.
    SSL_clear_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE);
  }
  TlsTransport(const TlsTransport&) = delete;
  TlsTransport& operator=(const TlsTransport&) = delete;

  asio::awaitable<std::size_t> read_some(asio::mutable_buffer out) override {
    struct Reading {
      TlsTransport& t;
      explicit Reading(TlsTransport& t) : t(t) { t.reading_ = true; }
      ~Reading() {
        t.reading_ = false;
        t.read_done_.cancel();
      }
    } reading(*this);
    if (out.size() == 0) co_return 0;
    auto* p = static_cast<std::uint8_t*>(out.data());
    for (;;) {
      // Decrypt all that is buffered, up to `out`: one call may return many records.
      std::size_t total = 0;
      bool eof = false;
      while (total < out.size()) {
        ERR_clear_error();
        std::size_t n = 0;
        int r = SSL_read_ex(ssl_.get(), p + total, out.size() - total, &n);
        if (r == 1) {
          total += n;
          continue;
        }
        int err = SSL_get_error(ssl_.get(), r);
        if (err == SSL_ERROR_WANT_READ) break;
        if (err == SSL_ERROR_ZERO_RETURN) {  // the peer's close_notify
          eof = true;
          break;
        }
        throw ssl_failure("tls: read failed");
      }
      // A KeyUpdate answer (or an alert) OpenSSL wrote while reading.
      if (!io_->tx_pending.empty()) co_await flush(false);
      if (total > 0) co_return total;
      if (eof) throw boost::system::system_error(asio::error::eof);
      co_await fill_rx();
    }
  }

  asio::awaitable<void> write(std::span<const asio::const_buffer> buffers) override {
    // Records are filled to 16 KiB: small buffers (yamux headers, small
    // payloads) and the tail of large ones are coalesced in staging_, topped
    // up from the next payload; whole records of large payloads are
    // encrypted straight from them.
    for (const auto& b : buffers) {
      const auto* p = static_cast<const std::uint8_t*>(b.data());
      std::size_t n = b.size();
      while (n > 0) {
        if (!staging_.empty() || n < kRecordBytes) {
          std::size_t take = std::min(n, kRecordBytes - staging_.size());
          staging_.insert(staging_.end(), p, p + take);
          p += take;
          n -= take;
          if (staging_.size() == kRecordBytes) encrypt_staging();
        } else {
          // Whole records, as many as fit in this send (at least one).
          std::size_t room = kSendBytes - std::min(kSendBytes, io_->tx_pending.size());
          std::size_t whole = std::min(n - n % kRecordBytes, std::max(kRecordBytes, room - room % kRecordBytes));
          if (io_->tx_pending.capacity() < kSendCapacity) io_->tx_pending.reserve(kSendCapacity);
          encrypt(p, whole);
          p += whole;
          n -= whole;
        }
        if (io_->tx_pending.size() >= kSendBytes) co_await flush(true);
      }
    }
    if (!staging_.empty()) encrypt_staging();
    co_await flush(true);
  }

  asio::awaitable<void> shutdown(PeerWait wait) override {
    using namespace asio::experimental::awaitable_operators;
    if (closed_) co_return;
    if (wait == PeerWait::none) {
      co_await send_close_notify();
      boost::system::error_code ignored;
      socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
      co_return;
    }
    // Sends close_notify, then waits for the peer's; a peer that never
    // answers costs at most the timer.
    asio::steady_timer timer(socket_.get_executor(), std::chrono::seconds(1));
    co_await (close_notify() || timer.async_wait(asio::as_tuple(asio::use_awaitable)));
  }

  void close() override {
    if (closed_) return;
    closed_ = true;
    boost::system::error_code ignored;
    socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  void abandon() override {
    boost::system::error_code ignored;
    socket_.cancel(ignored);
  }

  void trim() override {
    // Only what a bulk transfer grew; the next one grows them again.
    if (!sending_ && io_->tx_pending.empty() && io_->tx_pending.capacity() > 2 * kRecordBytes)
      io_->tx_pending = {};
    if (!sending_ && tx_sending_.capacity() > 2 * kRecordBytes) tx_sending_ = {};
    // A read is usually waiting in rx: the next one gets a small buffer.
    shrink_rx_ = io_->rx_size > kMinReceiveBytes;
  }

  asio::any_io_executor get_executor() override { return socket_.get_executor(); }

 private:
  struct SslFree {
    void operator()(SSL* ssl) const { SSL_free(ssl); }
  };
  // Ciphertext per send (and plaintext per SSL_write_ex). Measured on loopback
  // (docs/PERFORMANCE.md): 512-768 KiB sends beat 256 KiB by ~30% (half the
  // syscalls, and half the wake-ups of the reader), 1 MiB and more lose again.
  static constexpr std::size_t kSendBytes = 768 * 1024;
  // What tx_pending can reach: a send's worth, one more record, record overheads.
  static constexpr std::size_t kSendCapacity = kSendBytes + 3 * kRecordBytes;
  // The receive buffer starts small (idle sessions) and doubles while reads
  // fill it. Up to 1 MiB: a reader that drains big bites keeps the kernel's
  // receive window open (with 256 KiB the sender was window-limited ~45% of
  // its busy time, tcp_info's rwnd_limited).
  static constexpr std::size_t kMinReceiveBytes = 32 * 1024;
  static constexpr std::size_t kMaxReceiveBytes = 1024 * 1024;

  void encrypt(const std::uint8_t* p, std::size_t n) {
    ERR_clear_error();
    std::size_t written = 0;
    if (SSL_write_ex(ssl_.get(), p, n, &written) != 1 || written != n) throw ssl_failure("tls: write failed");
  }
  void encrypt_staging() {
    encrypt(staging_.data(), staging_.size());
    staging_.clear();
  }

  // Sends tx_pending (and what is added meanwhile). One send at a time, in
  // the order OpenSSL produced the records; with wait_all, returns only when
  // everything pending when called has been sent, else leaves that to the
  // send already in flight.
  asio::awaitable<void> flush(bool wait_all) {
    for (;;) {
      if (sending_) {
        if (!wait_all) co_return;
        co_await send_done_.async_wait(asio::as_tuple(asio::use_awaitable));
        continue;
      }
      if (io_->tx_pending.empty()) co_return;
      sending_ = true;
      std::swap(io_->tx_pending, tx_sending_);
      auto [ec, n] = co_await asio::async_write(socket_, asio::buffer(tx_sending_), whole_sends,
                                                asio::as_tuple(asio::use_awaitable));
      tx_sending_.clear();
      // The large buffer goes back to tx_pending: one of the two grows, not both.
      if (io_->tx_pending.empty()) std::swap(io_->tx_pending, tx_sending_);
      sending_ = false;
      send_done_.cancel();
      if (ec) throw boost::system::system_error(ec, "tls: send failed");
    }
  }

  // Reads more ciphertext from the socket into rx (all of rx has been consumed).
  asio::awaitable<void> fill_rx() {
    if (shrink_rx_) {  // trim() came while the last read held the buffer
      shrink_rx_ = false;
      if (io_->rx_size > kMinReceiveBytes) allocate_rx(kMinReceiveBytes);
    } else if (io_->rx_end == io_->rx_size && io_->rx_size < kMaxReceiveBytes) {
      allocate_rx(std::min(io_->rx_size * 2, kMaxReceiveBytes));
    }
    io_->rx_begin = io_->rx_end = 0;
    auto [ec, n] = co_await socket_.async_read_some(asio::buffer(io_->rx.get(), io_->rx_size),
                                                    asio::as_tuple(asio::use_awaitable));
    if (ec == asio::error::eof) {
      // TCP ended without close_notify: the data may have been cut short.
      throw boost::system::system_error(asio::ssl::error::stream_truncated, "tls: connection closed without close_notify");
    }
    if (ec) throw boost::system::system_error(ec, "tls: receive failed");
    io_->rx_end = n;
  }

  void allocate_rx(std::size_t size) {
    io_->rx_size = std::max(size, kMinReceiveBytes);
    io_->rx = std::make_unique_for_overwrite<std::uint8_t[]>(io_->rx_size);
  }

  // Sends close_notify. Never throws; false when it could not be sent.
  asio::awaitable<bool> send_close_notify() {
    try {
      ERR_clear_error();
      if (SSL_shutdown(ssl_.get()) < 0) co_return false;
      co_await flush(true);
      co_return true;
    } catch (const std::exception&) {
      co_return false;
    }
  }

  // Part of shutdown(): sends close_notify and waits for the peer's. Never throws.
  asio::awaitable<void> close_notify() {
    try {
      if (!co_await send_close_notify()) co_return;
      if (SSL_get_shutdown(ssl_.get()) & SSL_RECEIVED_SHUTDOWN) co_return;
      if (reading_) {
        // The Mux's reader is in read_some: it will see the close_notify (or the end).
        co_await read_done_.async_wait(asio::as_tuple(asio::use_awaitable));
        co_return;
      }
      std::vector<std::uint8_t> discard(kRecordBytes);
      for (;;) co_await read_some(asio::buffer(discard));  // ends by throwing: eof at close_notify
    } catch (const std::exception&) {
    }
  }

  // Declared first: destroyed after ssl_, whose BIO points at it.
  std::unique_ptr<BioBuffers> io_;
  std::unique_ptr<SSL, SslFree> ssl_;
  asio::ip::tcp::socket socket_;
  std::vector<std::uint8_t> staging_;     // plaintext coalesced into one record
  std::vector<std::uint8_t> tx_sending_;  // ciphertext of the send in flight
  bool sending_ = false;
  bool shrink_rx_ = false;  // trim() asked for a small receive buffer
  bool reading_ = false;
  bool closed_ = false;
  asio::steady_timer send_done_;  // cancelled when a send ends
  asio::steady_timer read_done_;  // cancelled when a read_some ends
};

}  // namespace

std::unique_ptr<Transport> make_tls_transport(std::unique_ptr<TlsSocket> stream) {
  SSL* ssl = stream->native_handle();
  BIO* old_bio = SSL_get_rbio(ssl);
  const BIO_METHOD* method = buffers_bio_method();
  // asio's engine must have finished: handshake done, all its output sent.
  if (method == nullptr || !SSL_is_init_finished(ssl) || old_bio == nullptr ||
      BIO_ctrl_wpending(SSL_get_wbio(ssl)) != 0) {
    return std::make_unique<AsioTlsTransport>(std::move(stream));
  }
  BIO* bio = BIO_new(method);
  if (bio == nullptr) return std::make_unique<AsioTlsTransport>(std::move(stream));

  // Ciphertext already received but not yet decrypted moves with the SSL: by
  // our protocol the peer sends nothing at this point, but a peer that
  // starts early must not lose bytes. First what sits in asio's BIO pair,
  // then what asio read past it (stream_core::input_). Plaintext OpenSSL
  // already decrypted (SSL_pending) stays inside the SSL.
  auto io = std::make_unique<BioBuffers>();
  const asio::const_buffer& unread = ((*stream).*stream_core_member()).input_;
  std::size_t in_bio = BIO_ctrl_pending(old_bio);
  std::size_t carried = in_bio + unread.size();
  if (carried > 0) {
    io->rx_size = carried;
    io->rx = std::make_unique_for_overwrite<std::uint8_t[]>(carried);
    std::size_t got = 0;
    while (got < in_bio) {  // a BIO pair is a ring: it may take two reads
      int n = BIO_read(old_bio, io->rx.get() + got, static_cast<int>(std::min<std::size_t>(in_bio - got, INT_MAX)));
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    std::memcpy(io->rx.get() + got, unread.data(), unread.size());
    io->rx_end = got + unread.size();
  }

  SSL_up_ref(ssl);  // asio's engine drops its reference when the stream goes
  auto transport = std::make_unique<TlsTransport>(std::move(stream->next_layer()), ssl, bio, std::move(io));
  stream.reset();
  return transport;
}

}  // namespace runsnack
