#include "net/receive_queue.hpp"

#include <gtest/gtest.h>

#include <array>
#include <random>
#include <string>

namespace runsnack {
namespace {

using View = std::span<const std::uint8_t>;

std::string pattern(std::size_t n, std::size_t offset = 0) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i + offset) * 131 % 251);
  return s;
}

const std::uint8_t* bytes(const std::string& s) { return reinterpret_cast<const std::uint8_t*>(s.data()); }

std::string peek_all(const ReceiveQueue& q, std::size_t max_bytes = SIZE_MAX) {
  std::array<View, 64> views;
  std::size_t n = q.peek(views, max_bytes);
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out.append(reinterpret_cast<const char*>(views[i].data()), views[i].size());
  return out;
}

ChunkPtr filled_chunk(const std::string& s) {
  auto c = std::make_unique_for_overwrite<std::uint8_t[]>(ChunkPool::kChunkBytes);
  std::copy(s.begin(), s.end(), c.get());
  return c;
}

TEST(ReceiveQueue, KeepsOrderAcrossAppendAdoptAndConsume) {
  ChunkPool pool;
  ReceiveQueue q(pool);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(peek_all(q), "");
  std::string a = pattern(100), b = pattern(200 * 1024, 7), c = pattern(30 * 1024, 3);
  q.append(bytes(a), a.size());
  q.append(bytes(b), b.size());
  q.adopt(filled_chunk("xx" + c), 2, 2 + c.size());
  EXPECT_EQ(q.size(), a.size() + b.size() + c.size());
  EXPECT_EQ(peek_all(q), a + b + c);
  q.consume(150);
  EXPECT_EQ(peek_all(q), (a + b + c).substr(150));
  std::string got(1000, '\0');
  EXPECT_EQ(q.read(reinterpret_cast<std::uint8_t*>(got.data()), got.size()), 1000u);
  EXPECT_EQ(got, (a + b + c).substr(150, 1000));
  q.consume(q.size());
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(peek_all(q), "");
}

TEST(ReceiveQueue, PeekHonoursLimitsAndViewsSurviveAppends) {
  ChunkPool pool;
  ReceiveQueue q(pool);
  std::string a = pattern(3 * ChunkPool::kChunkBytes);
  q.append(bytes(a), a.size());
  EXPECT_EQ(peek_all(q, 10), a.substr(0, 10));
  std::array<View, 2> two;
  ASSERT_EQ(q.peek(two, SIZE_MAX), 2u);
  std::string lent(reinterpret_cast<const char*>(two[0].data()), two[0].size());
  // More data arrives while the views are lent: they still show the same bytes.
  std::string more = pattern(5000, 1);
  q.append(bytes(more), more.size());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(two[0].data()), two[0].size()), lent);
  EXPECT_EQ(lent, a.substr(0, lent.size()));
  EXPECT_EQ(peek_all(q), a + more);
}

TEST(ReceiveQueue, SmallFirstMessageUsesASmallChunkAndChunksReturnToThePool) {
  ChunkPool pool(4);
  {
    ReceiveQueue q(pool);
    q.append(bytes("hello"), 5);
    q.consume(5);
    EXPECT_EQ(pool.kept(), 0u);
    EXPECT_EQ(pool.kept_small(), 1u);  // a small chunk, back for the next message
    std::string big = pattern(3 * ChunkPool::kChunkBytes);
    q.append(bytes(big), big.size());
    q.consume(ChunkPool::kChunkBytes);
    EXPECT_EQ(pool.kept(), 1u);
  }
  EXPECT_EQ(pool.kept(), 3u);  // the rest came back when the queue went
  pool.trim();
  EXPECT_EQ(pool.kept(), 0u);
  EXPECT_EQ(pool.kept_small(), 0u);
}

TEST(ReceiveQueue, PoolKeepsAtMostItsLimit) {
  ChunkPool pool(2);
  std::vector<ChunkPtr> out;
  for (int i = 0; i < 5; ++i) out.push_back(pool.get());
  for (auto& c : out) pool.put(std::move(c));
  EXPECT_EQ(pool.kept(), 2u);
  pool.put(nullptr);
  EXPECT_EQ(pool.kept(), 2u);
}

TEST(ReceiveQueue, AdoptingNothingKeepsTheQueueEmpty) {
  ChunkPool pool;
  ReceiveQueue q(pool);
  q.adopt(pool.get(), 10, 10);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(pool.kept(), 1u);
}

// Random operations against a std::string model.
TEST(ReceiveQueue, MatchesAModelUnderRandomOperations) {
  std::mt19937 rng(12345);
  ChunkPool pool(3);
  ReceiveQueue q(pool);
  std::string model;
  std::size_t offset = 0;
  for (int step = 0; step < 5000; ++step) {
    switch (rng() % 5) {
      case 0: {
        std::string s = pattern(rng() % 3 == 0 ? rng() % 100000 : rng() % 300, offset);
        offset += s.size();
        q.append(bytes(s), s.size());
        model += s;
        break;
      }
      case 1: {
        std::size_t begin = rng() % 1000, n = ReceiveQueue::kMinAdoptBytes + rng() % 20000;
        std::string s = pattern(n, offset);
        offset += n;
        q.adopt(filled_chunk(std::string(begin, '?') + s), begin, begin + n);
        model += s;
        break;
      }
      case 2: {
        std::size_t n = model.empty() ? 0 : rng() % (model.size() + 1);
        q.consume(n);
        model.erase(0, n);
        break;
      }
      case 3: {
        std::string got(rng() % 70000, '\0');
        std::size_t n = q.read(reinterpret_cast<std::uint8_t*>(got.data()), got.size());
        ASSERT_EQ(n, std::min(got.size(), model.size()));
        ASSERT_EQ(got.substr(0, n), model.substr(0, n));
        model.erase(0, n);
        break;
      }
      default: {
        std::size_t limit = rng() % 200000;
        ASSERT_EQ(peek_all(q, limit), model.substr(0, std::min(limit, model.size())));
      }
    }
    ASSERT_EQ(q.size(), model.size());
    ASSERT_LE(pool.kept(), 3u);
  }
  EXPECT_EQ(peek_all(q), model);
}

}  // namespace
}  // namespace runsnack
