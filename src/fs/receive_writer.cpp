#include "fs/receive_writer.hpp"

#include "fs/content_digest.hpp"
#include "fs/frame.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <unistd.h>

#include <chrono>

namespace runsnack::fs {

namespace asio = boost::asio;

struct ReceiveWriter::Current {
  const Entry* entry = nullptr;
  std::optional<Base> base;
  std::optional<AtomicFile> out;
  std::optional<ContentDigest> md;
  std::uint64_t got = 0;
  // Only a file rebuilt partly from our own older copy is hashed here: that copy may have
  // changed since its chunks were offered. The sender vouches for the bytes it sends.
  bool hashing = false;
};

ReceiveWriter::ReceiveWriter(asio::any_io_executor io, int root, HashCache* cache, WriteLimits limits)
    : io_(std::move(io)), limits_(std::move(limits)), cursor_(root, limits_.owner), cache_(cache), thread_([this] { run(); }) {}

ReceiveWriter::~ReceiveWriter() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    queue_.clear();
  }
  wake_.notify_one();
  thread_.join();
}

void ReceiveWriter::push(Piece piece) {
  bool wake = false;
  {
    std::lock_guard lock(mu_);
    if (error_) return;
    queued_bytes_ += piece.kind == Piece::data ? piece.size : 0;
    queue_.push_back(std::move(piece));
    wake = idle_;  // a wake-up per piece would cost a futex call per small file
    idle_ = false;
  }
  if (wake) wake_.notify_one();
}

void ReceiveWriter::begin(const Entry& entry, std::optional<Base> base) {
  push(Piece{.kind = Piece::begin, .entry = &entry, .base = std::move(base)});
}
void ReceiveWriter::data(std::unique_ptr<std::uint8_t[]> bytes, std::size_t size, bool compressed, bool pooled) {
  push(Piece{.kind = Piece::data, .bytes = std::move(bytes), .size = size, .compressed = compressed, .pooled = pooled});
}
void ReceiveWriter::same(std::uint64_t chunks) { push(Piece{.kind = Piece::same, .size = chunks}); }
void ReceiveWriter::hole(std::uint64_t chunks) { push(Piece{.kind = Piece::hole, .size = chunks}); }
void ReceiveWriter::end() { push(Piece{.kind = Piece::end}); }
void ReceiveWriter::abort() { push(Piece{.kind = Piece::abort}); }

std::unique_ptr<std::uint8_t[]> ReceiveWriter::buffer() {
  {
    std::lock_guard lock(mu_);
    if (!spare_.empty()) {
      auto b = std::move(spare_.back());
      spare_.pop_back();
      return b;
    }
  }
  return std::make_unique_for_overwrite<std::uint8_t[]>(kMaxDataBytes);
}

std::optional<Error> ReceiveWriter::failed() {
  std::lock_guard lock(mu_);
  return error_;
}

asio::awaitable<void> ReceiveWriter::wait_until(std::size_t max_queued) {
  for (;;) {
    std::shared_ptr<asio::steady_timer> timer;
    {
      std::lock_guard lock(mu_);
      const bool idle = queue_.empty() && busy_ == 0;
      if (error_ || idle || (max_queued > 0 && queued_bytes_ <= max_queued)) co_return;
      // The writer cancels this timer when it has made room; the expiry is only a backstop.
      timer = std::make_shared<asio::steady_timer>(io_, std::chrono::milliseconds(100));
      room_ = timer;
    }
    co_await timer->async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

asio::awaitable<void> ReceiveWriter::wait_for_room() { co_await wait_until(kMaxQueuedBytes); }

asio::awaitable<Result<WrittenStats>> ReceiveWriter::finish() {
  co_await wait_until(0);
  std::lock_guard lock(mu_);
  if (error_) co_return *error_;
  co_return stats_;
}

void ReceiveWriter::run() {
  std::deque<Piece> batch;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      if (queue_.empty()) {
        idle_ = true;
        wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      }
      if (stop_) break;
      batch.swap(queue_);  // all that is queued, in one lock
      busy_ = batch.size();
    }
    while (!batch.empty()) {
      // After an error the rest is dropped: the stream side stops at its next piece.
      Result<void> r = apply(batch.front());
      if (!r && r.error().code == errc::exhausted && !limits_.full_message.empty())
        r = Error(errc::exhausted, limits_.full_message);
      Piece& done = batch.front();
      const std::size_t done_bytes = done.kind == Piece::data ? done.size : 0;
      std::unique_ptr<std::uint8_t[]> reusable = done.pooled ? std::move(done.bytes) : nullptr;
      batch.pop_front();
      std::lock_guard lock(mu_);
      --busy_;
      queued_bytes_ -= done_bytes;
      if (reusable && spare_.size() < kMaxQueuedBytes / kMaxDataBytes + 8) spare_.push_back(std::move(reusable));
      if (stop_) {
        batch.clear();
        break;
      }
      if (!r && !error_) {
        error_ = r.error();
        queue_.clear();
        batch.clear();
        busy_ = 0;
        queued_bytes_ = 0;
      }
      const bool room = error_ || queued_bytes_ <= kMaxQueuedBytes / 2 || (queue_.empty() && busy_ == 0);
      if (room && room_) {
        asio::post(io_, [timer = std::move(room_)] { timer->cancel(); });
        room_.reset();
      }
    }
  }
  current_.reset();  // an unfinished file's temp file goes with it
}

Result<void> ReceiveWriter::apply(Piece& piece) {
  switch (piece.kind) {
    case Piece::begin: {
      auto out = AtomicFile::create(cursor_, piece.entry->path);
      if (!out) return out.error();
      current_ = std::make_unique<Current>();
      current_->entry = piece.entry;
      current_->base = std::move(piece.base);
      current_->out.emplace(std::move(*out));
      current_->hashing = current_->base.has_value();
      if (current_->hashing) current_->md.emplace();
      return {};
    }
    case Piece::data:
      return current_ ? write_data(piece) : fail(errc::malformed, "file data outside a file");
    case Piece::same:
      return current_ ? copy_same(piece.size) : fail(errc::malformed, "file data outside a file");
    case Piece::hole:
      return current_ ? skip_hole(piece.size) : fail(errc::malformed, "file data outside a file");
    case Piece::end:
      return current_ ? commit() : fail(errc::malformed, "file_end outside a file");
    case Piece::abort:
      if (current_ && current_->out->written() >= kChunkBytes) current_->out->keep_partial();
      current_.reset();
      return {};
  }
  return {};
}

Result<void> ReceiveWriter::write_data(Piece& piece) {
  Current& c = *current_;
  std::span<const std::uint8_t> plain(piece.bytes.get(), piece.size);
  std::vector<std::uint8_t> unpacked;
  if (piece.compressed) {
    auto d = decompress(plain);
    if (!d) return d.error();
    unpacked = std::move(*d);
    plain = unpacked;
  }
  c.got += plain.size();
  if (c.got > c.entry->size) return fail(errc::too_large, c.entry->path + ": more bytes than announced");
  if (auto r = count_written(plain.size()); !r) return r;
  if (c.hashing) c.md->update(plain);
  if (auto r = c.out->write(plain.data(), plain.size()); !r) return r.error();
  stats_.bytes += plain.size();
  return {};
}

// A pull's own limit, and the quota's plain words for a full disk.
Result<void> ReceiveWriter::count_written(std::uint64_t bytes) {
  written_total_ += bytes;
  if (limits_.max_bytes && written_total_ > *limits_.max_bytes)
    return fail(errc::too_large, limits_.over_message.empty() ? "more file data than this transfer may write"
                                                              : limits_.over_message);
  return {};
}

// The sender says the next chunks are a hole of its sparse file: nothing to write.
Result<void> ReceiveWriter::skip_hole(std::uint64_t count) {
  Current& c = *current_;
  if (c.got % kChunkBytes != 0 || count > (c.entry->size - c.got + kChunkBytes - 1) / kChunkBytes)
    return fail(errc::malformed, c.entry->path + ": a hole past the end of the file");
  const std::uint64_t bytes = std::min(count * kChunkBytes, c.entry->size - c.got);
  if (auto r = c.out->skip(bytes); !r) return r.error();
  if (c.hashing) c.md->zeros(bytes);
  c.got += bytes;
  return {};
}

// The sender says the next chunks equal ours: copy them from the base (never from its side).
Result<void> ReceiveWriter::copy_same(std::uint64_t count) {
  Current& c = *current_;
  const Base* base = c.base ? &*c.base : nullptr;
  if (!base || c.got % kChunkBytes != 0 || count > base->chunks || c.got / kChunkBytes + count > base->chunks)
    return fail(errc::malformed, c.entry->path + ": refers to chunks it was not offered");
  std::vector<std::uint8_t> copy(kChunkBytes);
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::uint64_t off = c.got;
    const std::size_t len = static_cast<std::size_t>(std::min<std::uint64_t>(kChunkBytes, base->size - off));
    auto n = read_full(base->fd.get(), std::span<std::uint8_t>(copy.data(), len), off, true);
    if (!n || *n != len) return fail(errc::io_error, c.entry->path + ": the older copy changed while in use");
    c.got += len;
    if (c.got > c.entry->size) return fail(errc::too_large, c.entry->path + ": more bytes than announced");
    if (auto r = count_written(len); !r) return r;
    c.md->update(std::span<const std::uint8_t>(copy.data(), len));
    if (auto r = c.out->write(copy.data(), len); !r) return r.error();
    stats_.bytes += len;
    stats_.reused_bytes += len;
  }
  return {};
}

Result<void> ReceiveWriter::commit() {
  std::unique_ptr<Current> c = std::move(current_);
  if (c->got != c->entry->size) return fail(errc::malformed, c->entry->path + ": fewer bytes than announced");
  if (c->hashing) {
    if (c->md->finish() != c->entry->sha256)
      return fail(errc::malformed, c->entry->path + ": checksum mismatch (our older copy changed while it was reused?)");
  }
  auto stamp = c->out->commit(c->entry->executable);
  if (!stamp) return stamp.error();
  if (c->base && c->base->resume) ::unlinkat(c->out->dir_fd(), resume_name(c->out->leaf()).c_str(), 0);
  if (cache_) cache_->put(c->entry->path, *stamp, c->entry->sha256, wall_clock_ns());
  ++stats_.files;
  return {};
}

}  // namespace runsnack::fs
