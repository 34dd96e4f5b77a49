#include "pool/dashboard/http_stream.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <array>
#include <chrono>
#include <fstream>
#include <optional>
#include <vector>

namespace runsnack::pool::dashboard {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace ssl = asio::ssl;

class TlsContext {
 public:
  TlsContext() : context(ssl::context::tls_server) {}
  mutable ssl::context context;  // OpenSSL's handle is not const; shared, read-only after loading
};

namespace {

// OpenSSL's reason for the last failure, or `fallback`.
std::string openssl_reason(const char* fallback) {
  unsigned long code = ERR_peek_last_error();
  ERR_clear_error();
  if (code == 0) return fallback;
  const char* reason = ERR_reason_error_string(code);
  return reason ? reason : fallback;
}

Result<void> readable(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(errc::io_error, std::string("--http-tls: cannot read the ") + what + " file " + path);
  return {};
}

// A type-erased handler, handed to Beast and asio/ssl with the stream's own
// executor: Boost 1.81's any_completion_executor lacks what their ops need.
template <class Handler>
auto on_stream(beast::tcp_stream& tcp, Handler handler) {
  return asio::bind_executor(tcp.get_executor(), [h = std::move(handler)](auto... args) mutable {
    std::move(h)(args...);
  });
}

// A close_notify to a peer that stopped reading must not hold the socket.
constexpr std::chrono::seconds kTeardownTimeout{5};

}  // namespace

Result<std::shared_ptr<TlsContext>> load_tls_context(const std::string& cert_path, const std::string& key_path) {
  if (auto r = readable(cert_path, "certificate"); !r) return r.error();
  if (auto r = readable(key_path, "key"); !r) return r.error();
  auto tls = std::make_shared<TlsContext>();
  SSL_CTX* ctx = tls->context.native_handle();
  ERR_clear_error();
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);  // a peer cannot make us redo handshakes on one connection
  if (SSL_CTX_use_certificate_chain_file(ctx, cert_path.c_str()) != 1)
    return fail(errc::invalid_argument, "--http-tls: " + cert_path + " is not a PEM certificate (" +
                                            openssl_reason("no certificate found") + ")");
  if (SSL_CTX_use_PrivateKey_file(ctx, key_path.c_str(), SSL_FILETYPE_PEM) != 1) {
    const std::string why = openssl_reason("no key found");
    if (why == "key values mismatch")
      return fail(errc::invalid_argument, "--http-tls: the key in " + key_path + " is not the key of the certificate in " +
                                              cert_path);
    return fail(errc::invalid_argument, "--http-tls: " + key_path + " is not a PEM private key (" + why + ")");
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    ERR_clear_error();
    return fail(errc::invalid_argument,
                "--http-tls: the key in " + key_path + " is not the key of the certificate in " + cert_path);
  }
  return tls;
}

struct HttpStream::Impl {
  explicit Impl(beast::tcp_stream tcp) : plain(std::move(tcp)) {}
  Impl(beast::tcp_stream tcp, ssl::context& context) { secure.emplace(std::move(tcp), context); }
  std::optional<beast::tcp_stream> plain;
  std::optional<beast::ssl_stream<beast::tcp_stream>> secure;

  beast::tcp_stream& tcp() { return plain ? *plain : secure->next_layer(); }
};

HttpStream::HttpStream(beast::tcp_stream tcp) : impl_(std::make_unique<Impl>(std::move(tcp))) {}
HttpStream::HttpStream(beast::tcp_stream tcp, const TlsContext& context)
    : impl_(std::make_unique<Impl>(std::move(tcp), context.context)) {}
HttpStream::~HttpStream() = default;
HttpStream::HttpStream(HttpStream&&) noexcept = default;
HttpStream& HttpStream::operator=(HttpStream&&) noexcept = default;

bool HttpStream::tls() const { return impl_->secure.has_value(); }

HttpStream::executor_type HttpStream::get_executor() { return impl_->tcp().get_executor(); }

beast::tcp_stream& HttpStream::next_layer() { return impl_->tcp(); }
const beast::tcp_stream& HttpStream::next_layer() const { return impl_->tcp(); }

void HttpStream::start_handshake(HandshakeHandler handler) {
  if (impl_->plain) {
    asio::post(impl_->plain->get_executor(), [h = std::move(handler)]() mutable { std::move(h)(boost::system::error_code{}); });
    return;
  }
  impl_->secure->async_handshake(ssl::stream_base::server, on_stream(impl_->tcp(), std::move(handler)));
}

void HttpStream::start_read(asio::mutable_buffer buffer, Handler handler) {
  if (impl_->plain) impl_->plain->async_read_some(buffer, on_stream(impl_->tcp(), std::move(handler)));
  else impl_->secure->async_read_some(buffer, on_stream(impl_->tcp(), std::move(handler)));
}

void HttpStream::start_write(const WriteBuffers& buffers, Handler handler) {
  // A vector: the operation keeps its own copy of the sequence, `buffers` dies when this returns.
  if (impl_->plain) {
    std::vector<asio::const_buffer> out(buffers.buffers.begin(), buffers.buffers.begin() + buffers.count);
    impl_->plain->async_write_some(std::move(out), on_stream(impl_->tcp(), std::move(handler)));
  } else {  // OpenSSL writes one buffer per call anyway
    impl_->secure->async_write_some(buffers.count ? buffers.buffers[0] : asio::const_buffer(),
                                    on_stream(impl_->tcp(), std::move(handler)));
  }
}

namespace {

// Reads what the peer still sends until it closes, then closes: closing with
// unread bytes would reset the connection and could lose our close frame.
void drain_then_close(beast::tcp_stream& tcp, std::shared_ptr<std::array<char, 512>> scratch,
                      HttpStream::HandshakeHandler handler) {
  auto next = [&tcp, scratch, h = std::move(handler)](boost::system::error_code ec, std::size_t) mutable {
    if (!ec) return drain_then_close(tcp, std::move(scratch), std::move(h));
    boost::system::error_code ignored;
    tcp.socket().close(ignored);
    std::move(h)(boost::system::error_code{});
  };
  tcp.async_read_some(asio::buffer(*scratch), asio::bind_executor(tcp.get_executor(), std::move(next)));
}

}  // namespace

void HttpStream::start_teardown(HandshakeHandler handler) {
  beast::tcp_stream& tcp = impl_->tcp();
  tcp.expires_after(kTeardownTimeout);
  if (impl_->plain) {
    boost::system::error_code ec;
    tcp.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
    drain_then_close(tcp, std::make_shared<std::array<char, 512>>(), std::move(handler));
    return;
  }
  // close_notify; OpenSSL then waits for the peer's, which ends the stream.
  auto closed = [&tcp, h = std::move(handler)](boost::system::error_code) mutable {
    boost::system::error_code ignored;
    tcp.socket().close(ignored);
    std::move(h)(boost::system::error_code{});
  };
  impl_->secure->async_shutdown(asio::bind_executor(tcp.get_executor(), std::move(closed)));
}

void teardown(beast::role_type, HttpStream& stream, boost::system::error_code& ec) {
  stream.next_layer().socket().close(ec);
}

}  // namespace runsnack::pool::dashboard
