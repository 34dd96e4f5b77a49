#include "net/receive_queue.hpp"

#include <algorithm>
#include <cstring>

namespace runsnack {

ChunkPtr ChunkPool::take(std::vector<ChunkPtr>& from, std::size_t bytes) {
  if (from.empty()) return std::make_unique_for_overwrite<std::uint8_t[]>(bytes);
  ChunkPtr c = std::move(from.back());
  from.pop_back();
  return c;
}

void ChunkPool::keep(std::vector<ChunkPtr>& to, ChunkPtr chunk) {
  if (chunk && to.size() < keep_) to.push_back(std::move(chunk));
}

void ChunkPool::trim() {
  free_.clear();
  free_.shrink_to_fit();
  free_small_.clear();
  free_small_.shrink_to_fit();
}

void ReceiveQueue::append(const std::uint8_t* data, std::size_t n) {
  while (n > 0) {
    if (chunks_.empty() || chunks_.back().end == chunks_.back().capacity) {
      Chunk c;
      if (chunks_.empty() && n <= ChunkPool::kSmallChunkBytes) {
        c.data = pool_.get_small();
        c.capacity = ChunkPool::kSmallChunkBytes;
      } else {
        c.data = pool_.get();
        c.capacity = ChunkPool::kChunkBytes;
      }
      chunks_.push_back(std::move(c));
    }
    Chunk& tail = chunks_.back();
    std::size_t take = std::min(n, tail.capacity - tail.end);
    std::memcpy(tail.data.get() + tail.end, data, take);
    tail.end += take;
    size_ += take;
    data += take;
    n -= take;
  }
}

void ReceiveQueue::adopt(ChunkPtr chunk, std::size_t begin, std::size_t end) {
  if (begin >= end) {
    pool_.put(std::move(chunk));
    return;
  }
  size_ += end - begin;
  chunks_.push_back(Chunk{std::move(chunk), ChunkPool::kChunkBytes, begin, end});
}

std::size_t ReceiveQueue::peek(std::span<std::span<const std::uint8_t>> out, std::size_t max_bytes) const {
  std::size_t filled = 0;
  for (const Chunk& c : chunks_) {
    if (filled == out.size() || max_bytes == 0) break;
    std::size_t n = std::min(c.end - c.begin, max_bytes);
    if (n == 0) continue;
    out[filled++] = std::span<const std::uint8_t>(c.data.get() + c.begin, n);
    max_bytes -= n;
  }
  return filled;
}

void ReceiveQueue::consume(std::size_t n) {
  n = std::min(n, size_);
  size_ -= n;
  while (n > 0) {
    Chunk& front = chunks_.front();
    std::size_t take = std::min(n, front.end - front.begin);
    front.begin += take;
    n -= take;
    if (front.begin == front.end) pop_front();
  }
}

std::size_t ReceiveQueue::read(std::uint8_t* out, std::size_t n) {
  std::size_t done = 0;
  while (done < n && !chunks_.empty()) {
    Chunk& front = chunks_.front();
    std::size_t take = std::min(n - done, front.end - front.begin);
    std::memcpy(out + done, front.data.get() + front.begin, take);
    done += take;
    consume(take);
  }
  return done;
}

void ReceiveQueue::clear() {
  for (Chunk& c : chunks_) release(c);
  chunks_.clear();
  chunks_.shrink_to_fit();
  size_ = 0;
}

void ReceiveQueue::release(Chunk& c) {
  if (c.capacity == ChunkPool::kChunkBytes) pool_.put(std::move(c.data));
  else pool_.put_small(std::move(c.data));
}

void ReceiveQueue::pop_front() {
  release(chunks_.front());
  chunks_.erase(chunks_.begin());
  // Emptied after a bulk transfer: do not hold its many slots while the
  // stream idles (a few are kept: request/response reuses them).
  if (chunks_.empty() && chunks_.capacity() > 2) chunks_.shrink_to_fit();
}

}  // namespace runsnack
