#include "session/handshake.hpp"

#include "crypto/secret.hpp"
#include "crypto/tls.hpp"
#include "session/message.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <variant>

namespace runsnack {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;

namespace {

// Reads exactly buffer_size(buf) bytes, or fails at the deadline. A peer that
// closes before the first byte of a message fails with errc::closed (e.g. the
// loser of a consumer's dial race); one that closes inside a message, with
// errc::malformed.
asio::awaitable<Result<void>> read_exact(TlsStream& stream, asio::mutable_buffer buf,
                                         std::chrono::steady_clock::time_point deadline, bool at_message_start = false) {
  asio::steady_timer timer(co_await asio::this_coro::executor, deadline);
  auto result = co_await (asio::async_read(stream, buf, asio::as_tuple(asio::use_awaitable)) ||
                          timer.async_wait(asio::as_tuple(asio::use_awaitable)));
  if (result.index() == 1) co_return fail(errc::timeout, "peer sent nothing in time");
  auto [ec, n] = std::get<0>(result);
  if (ec && n == 0 && at_message_start)
    co_return fail(errc::closed, "connection closed during the handshake (" + ec.message() + ")");
  if (ec) co_return fail(errc::malformed, "connection closed in the middle of a message (" + ec.message() + ")");
  co_return Result<void>{};
}

// Reads `n` bytes into `body` as they arrive: the buffer doubles only once
// what it holds has come, so a peer announcing 64 KiB and stalling holds 4 KiB.
asio::awaitable<Result<void>> read_growing(TlsStream& stream, std::size_t n, std::vector<std::uint8_t>& body,
                                           std::chrono::steady_clock::time_point deadline) {
  body.clear();
  while (body.size() < n) {
    std::size_t got = body.size();
    std::size_t step = std::min(n - got, std::max<std::size_t>(got, 4096));
    body.resize(got + step);
    if (auto r = co_await read_exact(stream, asio::buffer(body.data() + got, step), deadline); !r) co_return r.error();
  }
  co_return Result<void>{};
}

}  // namespace

asio::awaitable<Result<nlohmann::json>> read_tls_message(TlsStream& stream, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::array<std::uint8_t, kMessagePrefixBytes> prefix{};
  if (auto r = co_await read_exact(stream, asio::buffer(prefix), deadline, true); !r) co_return r.error();
  auto length = decode_message_length(prefix);
  if (!length) co_return length.error();
  std::vector<std::uint8_t> body;
  if (auto r = co_await read_growing(stream, *length, body, deadline); !r) co_return r.error();
  co_return decode_message_body(body);
}

asio::awaitable<Result<void>> write_tls_message(TlsStream& stream, const nlohmann::json& body) {
  std::string wire = encode_message(body);
  auto [ec, n] = co_await asio::async_write(stream, asio::buffer(wire), asio::as_tuple(asio::use_awaitable));
  if (ec) co_return fail(errc::closed, "connection closed during the handshake (" + ec.message() + ")");
  co_return Result<void>{};
}

asio::awaitable<Result<void>> send_auth_hello(TlsStream& stream, const Link& link) {
  auto binding = channel_binding(stream.native_handle());
  if (!binding) co_return binding.error();
  AuthHello hello;
  hello.grant_id = link.grant_id;
  hello.proof = auth_proof(derive_grant_key(link.secret), *binding);
  hello.hears_goodbye = true;  // hear_goodbye (session/goodbye_exchange.hpp) runs on every consumer session
  // Named, not a temporary in the co_await expression: GCC 12 mishandles those.
  const nlohmann::json hello_json = to_json(hello);
  co_return co_await write_tls_message(stream, hello_json);
}

asio::awaitable<Result<std::string>> prove_grant(TlsStream& stream, const Link& link,
                                                 std::chrono::milliseconds timeout) {
  if (auto w = co_await send_auth_hello(stream, link); !w) co_return w.error();
  auto msg = co_await read_tls_message(stream, timeout);
  if (!msg) co_return msg.error();
  auto reply = parse_auth_reply(*msg);
  if (!reply) co_return reply.error();
  if (!reply->ok) co_return fail(reply->code, "the provider refused: " + reply->reason);
  co_return reply->session_id;
}

asio::awaitable<Result<AuthHello>> read_auth_hello(TlsStream& stream, std::chrono::milliseconds timeout) {
  auto msg = co_await read_tls_message(stream, timeout);
  if (!msg) co_return msg.error();
  co_return parse_auth_hello(*msg);
}

asio::awaitable<Result<void>> send_auth_reply(TlsStream& stream, const AuthReply& reply) {
  const nlohmann::json reply_json = to_json(reply);
  co_return co_await write_tls_message(stream, reply_json);
}

bool proof_is_valid(const Grant& grant, const AuthHello& hello, std::span<const std::uint8_t> binding) {
  auto expected = auth_proof(grant.key, binding);
  return constant_time_equal(expected, hello.proof);
}

}  // namespace runsnack
