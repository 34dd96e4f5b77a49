#include "net/mux_stream.hpp"

#include "net/yamux_session.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

namespace runsnack {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {
asio::awaitable<void> wait_signal(asio::steady_timer& signal) {
  co_await signal.async_wait(asio::as_tuple(asio::use_awaitable));
}
}  // namespace

MuxStream::MuxStream(std::shared_ptr<Mux> mux, std::uint32_t id)
    : mux_(std::move(mux)),
      id_(id),
      rx_(mux_->chunks_),
      read_signal_(mux_->executor_),
      write_signal_(mux_->executor_) {
  read_signal_.expires_at(Clock::time_point::max());
  write_signal_.expires_at(Clock::time_point::max());
}

MuxStream::~MuxStream() {
  auto it = mux_->streams_.find(id_);
  if (it != mux_->streams_.end() && it->second == this) mux_->streams_.erase(it);
  // After close_write the peer may still be reading what we sent: an RST
  // would destroy that. Its further data is dropped (and, never consumed,
  // stops at the window) until its FIN ends the stream.
  if (!error_ && !local_fin_) reset();
}

void MuxStream::deliver(const std::uint8_t* data, std::size_t n) {
  if (error_) return;
  if (rx_.empty()) {
    // Nothing older is buffered: fill the waiting reader's buffer first.
    std::size_t room = read_into_.size() - read_direct_;
    if (room > 0) {
      std::size_t direct = std::min(room, n);
      std::memcpy(static_cast<std::uint8_t*>(read_into_.data()) + read_direct_, data, direct);
      read_direct_ += direct;
      data += direct;
      n -= direct;
      read_signal_.cancel();
      if (n == 0) return;
    }
  }
  rx_.append(data, n);
  read_signal_.cancel();
}

void MuxStream::deliver_chunk(ChunkPtr chunk, std::size_t n) {
  if (error_) {
    mux_->chunks_.put(std::move(chunk));
    return;
  }
  std::size_t begin = 0;
  if (rx_.empty()) {  // a waiting read_some gets what fits, as in deliver()
    std::size_t room = read_into_.size() - read_direct_;
    begin = std::min(room, n);
    if (begin > 0) {
      std::memcpy(static_cast<std::uint8_t*>(read_into_.data()) + read_direct_, chunk.get(), begin);
      read_direct_ += begin;
    }
  }
  rx_.adopt(std::move(chunk), begin, n);
  read_signal_.cancel();
}

void MuxStream::on_remote_fin() {
  remote_fin_ = true;
  read_signal_.cancel();
}

void MuxStream::on_reset(Error why) {
  if (!error_) error_ = std::move(why);
  stop_.request_stop();
  read_signal_.cancel();
  write_signal_.cancel();
}

asio::awaitable<Result<std::size_t>> MuxStream::read_some(asio::mutable_buffer out) {
  for (;;) {
    if (out.size() == 0) co_return std::size_t{0};
    if (!rx_.empty()) co_return consumed(rx_.read(static_cast<std::uint8_t*>(out.data()), out.size()));
    if (error_) co_return *error_;
    if (remote_fin_) co_return std::size_t{0};
    // Wait with `out` offered to deliver(); whatever ends the wait (data,
    // FIN, reset, cancellation) withdraws it.
    read_into_ = out;
    read_direct_ = 0;
    struct Withdraw {
      MuxStream& s;
      ~Withdraw() { s.read_into_ = {}; }
    } withdraw{*this};
    if (stall_limit_ > Clock::duration::zero()) read_signal_.expires_after(stall_limit_);
    co_await wait_signal(read_signal_);
    if (read_direct_ > 0) co_return consumed(std::exchange(read_direct_, 0));
    if (stall_limit_ > Clock::duration::zero() && rx_.empty() && !error_ && !remote_fin_ &&
        Clock::now() >= read_signal_.expiry())
      co_return fail(errc::timeout, "the peer stopped sending in the middle of a message (nothing for " +
                                        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(stall_limit_).count()) +
                                        " s)");
  }
}

asio::awaitable<Result<std::span<const asio::const_buffer>>> MuxStream::read_view(std::size_t max_bytes) {
  // Enough views for a few hundred KiB of 64 KiB chunks in one gather write.
  constexpr std::size_t kMaxViews = 16;
  views_.clear();
  max_bytes = std::max<std::size_t>(max_bytes, 1);  // an empty answer means end of stream
  // Data, FIN, reset and cancellation all cancel read_signal_.
  while (rx_.empty() && !error_ && !remote_fin_) co_await wait_signal(read_signal_);
  if (rx_.empty()) {
    if (error_) co_return *error_;
    co_return std::span<const asio::const_buffer>();
  }
  std::array<std::span<const std::uint8_t>, kMaxViews> spans;
  std::size_t n = rx_.peek(spans, max_bytes);
  for (std::size_t i = 0; i < n; ++i) views_.emplace_back(spans[i].data(), spans[i].size());
  co_return std::span<const asio::const_buffer>(views_);
}

void MuxStream::consume(std::size_t n) {
  views_.clear();
  n = std::min(n, rx_.size());
  rx_.consume(n);
  consumed(n);
}

std::size_t MuxStream::consumed(std::size_t n) {
  if (auto update = mux_->state_.consumed(id_, static_cast<std::uint32_t>(n), Clock::now()))
    mux_->enqueue(*update);
  return n;
}

asio::awaitable<Result<void>> MuxStream::read_exact(asio::mutable_buffer out) {
  auto* p = static_cast<std::uint8_t*>(out.data());
  std::size_t left = out.size();
  while (left > 0) {
    auto n = co_await read_some(asio::buffer(p, left));
    if (!n) co_return n.error();
    if (*n == 0) co_return fail(errc::closed, "yamux: stream ended early");
    p += *n;
    left -= *n;
  }
  co_return Result<void>{};
}

template <class Bytes>
asio::awaitable<Result<void>> MuxStream::read_growing_into(std::size_t n, Bytes& out, std::size_t upfront) {
  auto self = mux_;
  struct Held {  // what this read counts against the session, given back however it ends
    MuxStream& stream;
    std::size_t bytes = 0;
    ~Held() {
      stream.mux_->release_message_bytes(bytes);
      // The signal is a timer that only cancel() fires, outside a stalled read.
      stream.stall_limit_ = {};
      stream.read_signal_.expires_at(Clock::time_point::max());
    }
  } held{*this};
  stall_limit_ = mux_->config_.message_stall;
  out.clear();
  std::size_t got = 0;
  while (got < n) {
    if (got == out.size()) {
      // Room for what has arrived, else for a step of `upfront`; the capacity
      // at least doubles when it grows, so copies stay linear in the message.
      std::size_t step = std::min(n - got, std::max(rx_.size(), std::max<std::size_t>(upfront, 1)));
      if (got + step > out.capacity()) {
        std::size_t capacity = std::min(n, std::max(got + step, 2 * out.capacity()));
        std::size_t more = capacity - out.capacity();
        if (!mux_->hold_message_bytes(more))
          co_return fail(errc::exhausted, "the session already holds " + std::to_string(mux_->message_bytes() >> 20) +
                                              " MiB of partly received messages, its limit: too many large messages at once");
        held.bytes += more;
        out.reserve(capacity);
      }
      out.resize(got + step);
    }
    auto r = co_await read_some(asio::buffer(reinterpret_cast<std::uint8_t*>(out.data()) + got, out.size() - got));
    if (!r) co_return r.error();
    if (*r == 0) co_return fail(errc::closed, "yamux: stream ended early");
    got += *r;
  }
  co_return Result<void>{};
}

asio::awaitable<Result<void>> MuxStream::read_growing(std::size_t n, std::vector<std::uint8_t>& out,
                                                      std::size_t upfront) {
  co_return co_await read_growing_into(n, out, upfront);
}

asio::awaitable<Result<void>> MuxStream::read_growing(std::size_t n, std::string& out, std::size_t upfront) {
  co_return co_await read_growing_into(n, out, upfront);
}

Error MuxStream::session_end() const {
  return mux_->close_reason_.value_or(Error(errc::closed, "yamux: session closed"));
}

asio::awaitable<Result<void>> MuxStream::write(asio::const_buffer in) {
  auto self = mux_;  // keep the session while we reference its queue
  auto* p = static_cast<const std::uint8_t*>(in.data());
  std::size_t left = in.size();
  std::uint64_t last = 0;
  while (left > 0) {
    if (error_) co_return *error_;
    if (local_fin_) co_return fail(errc::closed, "yamux: stream closed for writing");
    // A closing session only flushes what is queued; it takes nothing new.
    // The session's own reason (a keepalive's timeout, say), so that a writer that gets here
    // before the streams are reset reads the same end as one that gets here after.
    if (mux_->closing_ || mux_->done_) co_return error_.value_or(session_end());
    auto h = mux_->state_.next_data(id_, left);
    if (!h) co_return h.error();
    if (h->length == 0) {  // the peer's window is exhausted: this is the flow control
      co_await wait_signal(write_signal_);
      continue;
    }
    last = mux_->enqueue(*h, asio::buffer(p, h->length));
    if (last == 0) co_return error_.value_or(session_end());
    p += h->length;
    left -= h->length;
  }
  // Our bytes stay referenced by the queue until written.
  while (mux_->flushed_seq_ < last) {
    if (mux_->done_) co_return error_.value_or(session_end());
    co_await wait_signal(mux_->flushed_signal_);
  }
  co_return Result<void>{};
}

asio::awaitable<Result<void>> MuxStream::close_write() {
  if (error_) co_return *error_;
  if (local_fin_) co_return Result<void>{};
  auto h = mux_->state_.close_write(id_);
  local_fin_ = true;
  if (!h) co_return h.error();
  mux_->enqueue(*h);
  co_return Result<void>{};
}

void MuxStream::reset() {
  if (error_) return;
  error_ = Error(errc::closed, "yamux: stream reset locally");
  stop_.request_stop();
  if (auto h = mux_->state_.reset(id_)) mux_->enqueue(*h);
  read_signal_.cancel();
  write_signal_.cancel();
}

}  // namespace runsnack
