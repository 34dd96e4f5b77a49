#include "cuda/server/handles.hpp"

#include <gtest/gtest.h>

namespace runsnack::cuda {
namespace {

TEST(CudaHandles, KindIsCheckedAndRemovedHandlesAreGone) {
  HandleTable t;
  auto m = t.add(Kind::Module, 0x1234);
  auto s = t.add(Kind::Stream, 0x5678, m);
  EXPECT_NE(m, s);
  EXPECT_GT(m, 2u);  // never a special stream value
  ASSERT_NE(t.get(m, Kind::Module), nullptr);
  EXPECT_EQ(t.get(m, Kind::Module)->value, 0x1234u);
  EXPECT_EQ(t.get(m, Kind::Stream), nullptr);
  EXPECT_EQ(t.get(s, Kind::Stream)->owner, m);
  EXPECT_EQ(t.get(12345, Kind::Module), nullptr);
  EXPECT_EQ(t.find_value(Kind::Module, 0x1234), m);
  EXPECT_FALSE(t.find_value(Kind::Stream, 0x1234));
  EXPECT_FALSE(t.remove(m, Kind::Event));
  EXPECT_TRUE(t.remove(m, Kind::Module));
  EXPECT_EQ(t.get(m, Kind::Module), nullptr);
  EXPECT_FALSE(t.remove(m, Kind::Module));
  EXPECT_EQ(t.size(), 1u);
}

TEST(CudaHandles, OfKindListsNewestFirst) {
  HandleTable t;
  auto a = t.add(Kind::Event, 1);
  t.add(Kind::Stream, 2);
  auto b = t.add(Kind::Event, 3);
  auto events = t.of_kind(Kind::Event);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].first, b);
  EXPECT_EQ(events[1].first, a);
}

}  // namespace
}  // namespace runsnack::cuda
