#pragma once
// A yamux stream's received, unread bytes as a queue of chunks, so that a
// reader can be lent the bytes in place (peek, then consume) instead of
// having them copied out, and consuming never moves the rest.
//
// Chunks: the first bytes of an otherwise empty queue go into a small chunk
// (a request, a reply, a token), everything after them into kChunkBytes
// chunks; both sizes come from a ChunkPool shared by the session's streams,
// which keeps a few free ones so that neither a bulk transfer nor a
// request/response exchange allocates (and faults in) memory per chunk. Whole chunks filled elsewhere (the Mux
// reads bulk payloads straight into one) are adopted without a copy.
//
// Bounds: the caller (the yamux window) bounds the bytes; chunks hold at
// most about 4x that (adopted chunks are at least a quarter full, see
// kMinAdoptBytes). An empty queue holds no memory. Not thread-safe.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace runsnack {

using ChunkPtr = std::unique_ptr<std::uint8_t[]>;

class ChunkPool {
 public:
  static constexpr std::size_t kChunkBytes = 64 * 1024;
  static constexpr std::size_t kSmallChunkBytes = 4 * 1024;

  // Keeps up to `keep` free chunks of each size.
  explicit ChunkPool(std::size_t keep = 8) : keep_(keep) {}
  // A kChunkBytes (or kSmallChunkBytes) buffer, not zeroed.
  ChunkPtr get() { return take(free_, kChunkBytes); }
  ChunkPtr get_small() { return take(free_small_, kSmallChunkBytes); }
  // Keeps it for the next get() while fewer than `keep` are kept; frees it otherwise.
  void put(ChunkPtr chunk) { keep(free_, std::move(chunk)); }
  void put_small(ChunkPtr chunk) { keep(free_small_, std::move(chunk)); }
  // Frees the kept ones (the session went quiet).
  void trim();
  std::size_t kept() const { return free_.size(); }
  std::size_t kept_small() const { return free_small_.size(); }

 private:
  static ChunkPtr take(std::vector<ChunkPtr>& from, std::size_t bytes);
  void keep(std::vector<ChunkPtr>& to, ChunkPtr chunk);

  std::vector<ChunkPtr> free_, free_small_;
  std::size_t keep_;
};

class ReceiveQueue {
 public:
  // adopt() takes chunks at least this full; a caller with less copies it in with append().
  static constexpr std::size_t kMinAdoptBytes = ChunkPool::kChunkBytes / 4;

  explicit ReceiveQueue(ChunkPool& pool) : pool_(pool) {}
  ReceiveQueue(const ReceiveQueue&) = delete;
  ReceiveQueue& operator=(const ReceiveQueue&) = delete;
  ~ReceiveQueue() { clear(); }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // Copies n bytes to the end.
  void append(const std::uint8_t* data, std::size_t n);
  // Takes a pool chunk whose bytes [begin, end) come next.
  void adopt(ChunkPtr chunk, std::size_t begin, std::size_t end);
  // Views of the first (up to max_bytes) bytes, in order, into at most
  // out.size() spans; returns how many spans were filled. They stay valid
  // until those bytes are consumed (appending more does not move them).
  std::size_t peek(std::span<std::span<const std::uint8_t>> out, std::size_t max_bytes) const;
  // Removes the first n bytes (n <= size()); emptied chunks go back.
  void consume(std::size_t n);
  // Copies up to n of the first bytes to `out` and consumes them; returns how many.
  std::size_t read(std::uint8_t* out, std::size_t n);
  // Drops everything.
  void clear();

 private:
  struct Chunk {
    ChunkPtr data;
    std::size_t capacity = 0;  // ChunkPool::kChunkBytes or kSmallChunkBytes
    std::size_t begin = 0, end = 0;
  };
  void release(Chunk& c);
  void pop_front();

  ChunkPool& pool_;
  std::vector<Chunk> chunks_;  // front first; few (a window's worth of 64 KiB chunks)
  std::size_t size_ = 0;
};

}  // namespace runsnack
