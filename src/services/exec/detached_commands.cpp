#include "services/exec/detached_commands.hpp"

#include "core/base32.hpp"
#include "core/json_fields.hpp"
#include "crypto/secret.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

namespace runsnack::exec {

namespace asio = boost::asio;

namespace {

constexpr std::chrono::milliseconds kPoll{20};

// The re-attachable links by token, with their consumer.
struct Registry {
  std::map<std::string, CommandLink*> links;
  std::map<std::string, std::size_t> per_consumer;
};

Registry& registry() {
  static Registry r;
  return r;
}

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::use_awaitable);
}

int index_of(fs::FrameType type) { return type == fs::FrameType::err ? 1 : 0; }

}  // namespace

std::shared_ptr<CommandLink> CommandLink::create(std::shared_ptr<MuxStream> stream, const PeerId& consumer) {
  auto& r = registry();
  std::string token;
  if (r.links.size() < kMaxInTotal && r.per_consumer[consumer.str()] < kMaxPerConsumer)
    token = base32::encode(random_bytes(16));
  return std::shared_ptr<CommandLink>(new CommandLink(std::move(stream), consumer, std::move(token)));
}

CommandLink::CommandLink(std::shared_ptr<MuxStream> stream, PeerId consumer, std::string token)
    : stream_(std::move(stream)), consumer_(std::move(consumer)), token_(std::move(token)) {
  if (token_.empty()) return;
  registry().links[token_] = this;
  ++registry().per_consumer[consumer_.str()];
}

CommandLink::~CommandLink() {
  if (token_.empty()) return;
  auto& r = registry();
  r.links.erase(token_);
  auto it = r.per_consumer.find(consumer_.str());
  if (it != r.per_consumer.end() && --it->second == 0) r.per_consumer.erase(it);
}

asio::awaitable<bool> CommandLink::write_output(fs::FrameType type, std::span<const std::uint8_t> bytes) {
  Channel& c = channels_[index_of(type)];
  c.held.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  c.written += bytes.size();
  // What is not sent yet stays (at most this chunk more than kReplayBytes: the pump waits in
  // flush() before it reads more); of the rest, only a re-attachable link keeps the last bytes.
  const auto unsent = static_cast<std::size_t>(c.written - c.sent);
  const std::size_t keep = token_.empty() ? unsent : std::max(kReplayBytes, unsent);
  if (c.held.size() > keep) c.held.erase(0, c.held.size() - keep);
  co_return co_await flush();
}

asio::awaitable<bool> CommandLink::flush() {
  while ((flushing_ || attaching_) && !gone_) co_await sleep_for(kPoll);  // the sender now sends ours too
  if (gone_) co_return false;
  flushing_ = true;
  for (int i = 0; i < 2;) {
    Channel& c = channels_[i];
    if (c.sent >= c.written) {
      ++i;
      continue;
    }
    while (attaching_ && !gone_) co_await sleep_for(kPoll);
    if (gone_) break;
    const std::uint64_t start = c.written - c.held.size();
    if (c.sent < start) c.sent = start;  // cannot happen (see write_output); never read before `held`
    const std::size_t from = static_cast<std::size_t>(c.sent - start);
    const std::size_t n = std::min<std::size_t>(c.held.size() - from, fs::kMaxDataBytes);
    // A copy: `held` may grow (and move) while the write waits.
    const std::vector<std::uint8_t> chunk(c.held.begin() + static_cast<std::ptrdiff_t>(from),
                                          c.held.begin() + static_cast<std::ptrdiff_t>(from + n));
    const std::uint64_t generation = generation_;
    auto stream = stream_;  // alive across the write even if a take-over replaces it
    auto r = co_await fs::write_frame(*stream, i == 0 ? fs::FrameType::out : fs::FrameType::err, chunk);
    if (r) {
      if (generation == generation_) c.sent += n;
      continue;
    }
    if (!co_await recover(generation, r.error())) break;
    i = 0;  // a take-over set `sent` to what the consumer has: both channels from there
  }
  flushing_ = false;
  co_return !gone_;
}

asio::awaitable<bool> CommandLink::write_control(const nlohmann::json& message) {
  for (;;) {
    if (!co_await flush()) co_return false;
    while ((flushing_ || attaching_) && !gone_) co_await sleep_for(kPoll);
    if (gone_) co_return false;
    const std::uint64_t generation = generation_;
    auto stream = stream_;
    flushing_ = true;  // the output waits for this frame: a stream has one write in flight
    auto r = co_await fs::write_control(*stream, message);
    flushing_ = false;
    if (r) co_return true;
    if (!co_await recover(generation, r.error())) co_return false;
  }
}

asio::awaitable<std::optional<fs::Frame>> CommandLink::read_frame() {
  for (;;) {
    if (gone_) co_return std::nullopt;
    const std::uint64_t generation = generation_;
    auto stream = stream_;
    auto f = co_await fs::read_frame(*stream);
    if (!f) {
      if (!co_await recover(generation, f.error())) co_return std::nullopt;
      continue;
    }
    co_return std::move(*f);
  }
}

asio::awaitable<std::optional<nlohmann::json>> CommandLink::read_control() {
  for (;;) {
    auto f = co_await read_frame();
    if (!f) co_return std::nullopt;
    if (f->type != fs::FrameType::control) continue;
    auto j = fs::decode_control(f->payload);
    if (j) co_return std::move(*j);
  }
}

asio::awaitable<void> CommandLink::close_write() {
  closed_ = true;
  (void)co_await stream_->close_write();
}

asio::awaitable<bool> CommandLink::recover(std::uint64_t generation, const Error& why) {
  if (generation != generation_) co_return !gone_;  // already taken over by a new stream
  // Only a session that went silent may come back; one the consumer closed (or a stream it
  // reset, or its end of stream) means it is gone, as it did before re-attaching existed.
  if (gone_ || token_.empty() || closed_ || !why.is(errc::timeout)) {
    gone_ = true;
    co_return false;
  }
  if (!detached_) {
    detached_ = true;
    spdlog::info("run: the session under a command went silent ({}); it keeps running for {} s for its consumer "
                 "to re-attach", why.what(), kReattachWithin.count());
  }
  const auto until = std::chrono::steady_clock::now() + kReattachWithin;
  while (generation == generation_ && !gone_ && std::chrono::steady_clock::now() < until) co_await sleep_for(kPoll);
  if (generation == generation_) gone_ = true;
  co_return !gone_;
}

void CommandLink::take_over(std::shared_ptr<MuxStream> stream, std::uint64_t out, std::uint64_t err,
                            std::uint64_t& lost_out, std::uint64_t& lost_err) {
  if (stream_) stream_->reset();  // the old one may not have noticed yet: its pending calls fail now
  stream_ = std::move(stream);
  ++generation_;
  detached_ = false;
  const std::uint64_t have[2] = {out, err};
  std::uint64_t* lost[2] = {&lost_out, &lost_err};
  for (int i = 0; i < 2; ++i) {
    Channel& c = channels_[i];
    const std::uint64_t start = c.written - c.held.size();
    const std::uint64_t from = std::min(have[i], c.written);
    *lost[i] = from < start ? start - from : 0;
    c.sent = std::max(from, start);
  }
}

asio::awaitable<void> CommandLink::serve_attach(std::shared_ptr<MuxStream> stream, const nlohmann::json& args,
                                                const PeerId& consumer, const std::string& session_id) {
  const std::string token = string_or(args, "token");
  auto& r = registry();
  auto it = token.empty() ? r.links.end() : r.links.find(token);
  if (it == r.links.end() || !(it->second->consumer_ == consumer) || it->second->gone_ || it->second->closed_) {
    const nlohmann::json refusal = {{"type", "error"},
                                    {"message", "the remote command is gone (it ended, or was stopped when the session "
                                                "was lost)"}};
    (void)co_await fs::write_control(*stream, refusal);
    (void)co_await stream->close_write();
    co_return;
  }
  auto link = it->second->shared_from_this();  // alive while we attach, whatever the command does
  const std::uint64_t out = static_cast<std::uint64_t>(std::max<std::int64_t>(0, int_or(args, "out", 0)));
  const std::uint64_t err = static_cast<std::uint64_t>(std::max<std::int64_t>(0, int_or(args, "err", 0)));
  std::uint64_t lost_out = 0, lost_err = 0;
  // Writers pause, the old stream is reset (a write pending on it fails and finds the new
  // generation), "attached" goes first, then what the consumer missed.
  link->attaching_ = true;
  link->take_over(stream, out, err, lost_out, lost_err);
  for (const auto& told : link->on_attach_) told(session_id);
  spdlog::info("run: a command was re-attached ({} bytes of its output lost)", lost_out + lost_err);
  const nlohmann::json attached = {{"type", "attached"}, {"lost_out", lost_out}, {"lost_err", lost_err}};
  (void)co_await fs::write_control(*stream, attached);
  link->attaching_ = false;
  if (!link->flushing_) (void)co_await link->flush();
}

}  // namespace runsnack::exec
