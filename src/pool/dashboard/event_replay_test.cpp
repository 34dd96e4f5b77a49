#include "pool/dashboard/event_replay.hpp"

#include <gtest/gtest.h>

namespace runsnack::pool::dashboard {
namespace {

Message msg(std::string text) { return std::make_shared<const std::string>(std::move(text)); }

TEST(EventReplay, KeepsTheLastEventsThenTheTiles) {
  EventReplay replay(2, 1000);
  replay.add("job_submitted", msg("a"));
  replay.add("tile_done", msg("t1"));
  replay.add("task_done", msg("b"));
  replay.add("task_done", msg("c"));
  auto all = replay.messages();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(*all[0], "b");
  EXPECT_EQ(*all[1], "c");
  EXPECT_EQ(*all[2], "t1");
}

TEST(EventReplay, TilesAreBoundedByBytesOldestDroppedFirst) {
  EventReplay replay(10, 10);
  replay.add("tile_done", msg("aaaa"));
  replay.add("tile_done", msg("bbbb"));
  replay.add("tile_done", msg("cccc"));  // 12 bytes: "aaaa" goes
  auto all = replay.messages();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(*all[0], "bbbb");
  EXPECT_EQ(*all[1], "cccc");
  EXPECT_EQ(replay.tile_bytes(), 8u);
  replay.add("tile_done", msg(std::string(11, 'x')));  // larger than the whole bound: not kept
  EXPECT_EQ(replay.messages().size(), 2u);
}

}  // namespace
}  // namespace runsnack::pool::dashboard
