#include "session/session.hpp"

#include "session/message.hpp"

#include <boost/asio/buffer.hpp>

#include <array>
#include <vector>

namespace runsnack {

namespace asio = boost::asio;

asio::awaitable<Result<nlohmann::json>> read_stream_message(MuxStream& stream, std::uint32_t max_bytes) {
  std::array<std::uint8_t, kMessagePrefixBytes> prefix{};
  if (auto r = co_await stream.read_exact(asio::buffer(prefix)); !r) co_return r.error();
  auto length = decode_message_length(prefix, max_bytes);
  if (!length) co_return length.error();
  std::vector<std::uint8_t> body;  // allocated as it arrives (a pool message may announce 12 MiB)
  if (auto r = co_await stream.read_growing(*length, body); !r) co_return r.error();
  co_return decode_message_body(body, max_bytes);
}

asio::awaitable<Result<void>> write_stream_message(MuxStream& stream, const nlohmann::json& body) {
  std::string wire = encode_message(body);
  co_return co_await stream.write(asio::buffer(wire));
}

namespace {
// A session that ended because the proof was refused: that is the reason to give.
Error refusal_or(const PendingAuth& auth, Error other) {
  return auth.settled() && !auth.result() ? auth.result().error() : std::move(other);
}
}  // namespace

asio::awaitable<Result<std::shared_ptr<MuxStream>>> Session::open_pipelined(const StreamHeader& header) {
  auto stream = co_await mux_->open_stream();
  if (!stream) co_return refusal_or(*auth_, stream.error());
  const nlohmann::json header_json = to_json(header);  // not a temporary: GCC 12 coroutine bug
  if (auto w = co_await write_stream_message(**stream, header_json); !w) co_return refusal_or(*auth_, w.error());
  co_return *stream;
}

asio::awaitable<Result<void>> Session::authenticated() {
  auto id = co_await auth_->wait();
  if (!id) co_return id.error();
  info_.session_id = *id;
  co_return Result<void>{};
}

asio::awaitable<Result<void>> Session::answer(MuxStream& stream, const std::string& service) {
  // A refused proof ends the session: its reason, not the stream's reset, is the answer.
  if (auto a = co_await authenticated(); !a) co_return a.error();
  auto msg = co_await read_stream_message(stream);
  if (!msg) co_return msg.error();
  auto reply = parse_stream_reply(*msg);
  if (!reply) co_return reply.error();
  if (!reply->ok) co_return fail(reply->code, "the provider refused '" + service + "': " + reply->reason);
  co_return Result<void>{};
}

asio::awaitable<Result<void>> Session::answers(MuxStream& stream, const std::string& service) {
  if (auto header = co_await answer(stream, service); !header) co_return header.error();
  auto msg = co_await read_stream_message(stream);
  if (!msg) co_return msg.error();
  auto reply = parse_stream_reply(*msg);
  if (!reply) co_return reply.error();
  if (!reply->ok) co_return fail(errc::refused, reply->reason);
  co_return Result<void>{};
}

asio::awaitable<Result<std::shared_ptr<MuxStream>>> Session::open(const StreamHeader& header) {
  auto stream = co_await open_pipelined(header);
  if (!stream) co_return stream.error();
  if (auto a = co_await answer(**stream, header.service); !a) co_return a.error();
  co_return *stream;
}

}  // namespace runsnack
