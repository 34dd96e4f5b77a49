#include "services/exec/kept_sync_states.hpp"

#include <gtest/gtest.h>

#include <string>

namespace runsnack::exec {
namespace {

using namespace std::chrono_literals;
using Clock = KeptSyncStates::Clock;

// A state of `entries` manifest entries whose paths are `path_bytes` long (what a consumer controls).
std::unique_ptr<fs::SyncState> state_of(std::size_t entries, std::size_t path_bytes) {
  auto s = std::make_unique<fs::SyncState>();
  s->digest = std::string(64, 'a');
  for (std::size_t i = 0; i < entries; ++i) {
    std::string path = std::to_string(i) + "/" + std::string(path_bytes, 'x');
    s->entries.push_back({path, fs::EntryType::file, 0, false, std::string(64, '0'), ""});
    s->hashes.put(path, {}, std::string(64, '0'), 0);
  }
  return s;
}

constexpr std::size_t kMiB = 1 << 20;

TEST(KeptSyncStates, MemoryIsCountedFromTheStatesPathsNotTheirNumber) {
  // 1,000 entries of 4 KB paths: the manifest's and the hash cache's copies of each path count.
  const std::size_t bytes = state_of(1000, 4000)->memory_bytes();
  EXPECT_GT(bytes, 2 * 1000 * 4000u);
  EXPECT_LT(bytes, 3 * 1000 * 4000u);
  EXPECT_LT(state_of(10, 10)->memory_bytes(), 16 * 1024u);
}

TEST(KeptSyncStates, AConsumersStatesStayWithinItsShare) {
  KeptSyncStates kept({4 * kMiB, 64 * kMiB, 60s});
  const auto t0 = Clock::time_point{} + 1h;
  // 18 workspaces of ~1 MiB of paths each (the attack of issue 37, scaled down): what was 16 states
  // kept, whatever their size, is now at most the consumer's share.
  for (int i = 0; i < 18; ++i)
    kept.put_back("mallory", "ws" + std::to_string(i), state_of(120, 4000), t0 + i * 1s);
  EXPECT_LE(kept.bytes_of("mallory"), 4 * kMiB);
  EXPECT_GE(kept.count(), 2u);
  EXPECT_LT(kept.count(), 5u);
  // The most recent stay, the oldest went first.
  EXPECT_NE(kept.take("ws17"), nullptr);
  EXPECT_EQ(kept.take("ws0"), nullptr);
}

TEST(KeptSyncStates, AStateLargerThanAConsumersShareIsNotKept) {
  KeptSyncStates kept({1 * kMiB, 64 * kMiB, 60s});
  const auto now = Clock::time_point{} + 1h;
  EXPECT_TRUE(kept.put_back("ana", "small", state_of(10, 100), now));
  EXPECT_FALSE(kept.put_back("ana", "big", state_of(500, 4000), now));
  EXPECT_EQ(kept.take("big"), nullptr);
  EXPECT_NE(kept.take("small"), nullptr);
  EXPECT_EQ(kept.bytes(), 0u);
}

TEST(KeptSyncStates, EveryonesStatesStayWithinTheTotal) {
  KeptSyncStates kept({4 * kMiB, 6 * kMiB, 60s});
  const auto t0 = Clock::time_point{} + 1h;
  for (int c = 0; c < 10; ++c)
    kept.put_back("consumer" + std::to_string(c), "c" + std::to_string(c), state_of(240, 4000), t0 + c * 1s);
  EXPECT_LE(kept.bytes(), 6 * kMiB);
  EXPECT_NE(kept.take("c9"), nullptr);  // the newest is kept, the oldest made room for it
  EXPECT_EQ(kept.take("c0"), nullptr);
}

TEST(KeptSyncStates, IdleStatesAreReleased) {
  KeptSyncStates kept({32 * kMiB, 128 * kMiB, 60s});
  const auto t0 = Clock::time_point{} + 1h;
  EXPECT_FALSE(kept.next_idle());
  kept.put_back("ana", "a", state_of(100, 100), t0);
  kept.put_back("bo", "b", state_of(100, 100), t0 + 30s);
  EXPECT_EQ(kept.next_idle(), t0 + 60s);
  EXPECT_EQ(kept.release_idle(t0 + 59s), 0u);
  EXPECT_GT(kept.release_idle(t0 + 60s), 0u);
  EXPECT_EQ(kept.count(), 1u);
  EXPECT_EQ(kept.next_idle(), t0 + 90s);
  kept.release_idle(t0 + 90s);
  EXPECT_EQ(kept.count(), 0u);
  EXPECT_EQ(kept.bytes(), 0u);
  EXPECT_EQ(kept.bytes_of("bo"), 0u);
  EXPECT_FALSE(kept.next_idle());
}

TEST(KeptSyncStates, TakenOutWhileASyncRunsAndDroppedWithItsWorkspace) {
  KeptSyncStates kept({32 * kMiB, 128 * kMiB, 60s});
  const auto now = Clock::time_point{} + 1h;
  kept.put_back("ana", "w", state_of(10, 10), now);
  auto taken = kept.take("w");
  ASSERT_NE(taken, nullptr);
  EXPECT_EQ(kept.take("w"), nullptr);  // a second sync meanwhile loads its own
  EXPECT_EQ(kept.bytes(), 0u);
  kept.put_back("ana", "w", std::move(taken), now);
  kept.drop("w");
  EXPECT_EQ(kept.take("w"), nullptr);
  EXPECT_EQ(kept.bytes_of("ana"), 0u);
}

}  // namespace
}  // namespace runsnack::exec
