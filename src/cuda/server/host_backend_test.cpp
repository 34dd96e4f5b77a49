#include "cuda/server/host_backend.hpp"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace runsnack::cuda {
namespace {

constexpr u64 kMiB = 1ull << 20;

// A session's 16 servers (kMaxServersPerSession) hold what one GPU of 4 GiB would: 256 MiB each.
constexpr u64 kDevice = HostBackend::kTotalMemory;
TEST(HostBackend, AllocationsPastTheDeviceMemoryAreOutOfMemory) {
  HostBackend b;
  u64 free = 0, total = 0;
  ASSERT_EQ(b.mem_get_info(free, total), 0);
  EXPECT_EQ(total, 256 * kMiB);
  u64 p = 0;
  EXPECT_EQ(b.mem_alloc(total + 1, p), kErrOutOfMemory);
  EXPECT_EQ(b.mem_alloc(~0ull, p), kErrOutOfMemory);
  std::vector<u64> held;
  for (u64 q = 0; held.size() < 64 && b.mem_alloc(8 * kMiB, q) == 0;) held.push_back(q);
  EXPECT_EQ(held.size(), kDevice / (8 * kMiB));
  ASSERT_EQ(b.mem_free(held.back()), 0);
  EXPECT_EQ(b.mem_alloc(8 * kMiB, p), 0);  // what was freed can be taken again
  EXPECT_EQ(b.mem_alloc(1, p), kErrOutOfMemory);
  EXPECT_EQ(b.calls().back(), "mem_alloc 1 (out of memory)");
}

// Tiny allocations take whole 256-byte slots, so their count is bounded too.
TEST(HostBackend, SmallAllocationsAreChargedWholeSlots) {
  HostBackend b;
  u64 p = 0, count = 0;
  while (count <= kDevice / 256 && b.mem_alloc(1, p) == 0) ++count;
  EXPECT_EQ(count, kDevice / 256);
}

// Globals (one 64 KiB buffer per name), functions and events are device memory too; an unloaded
// module gives back what it held.
TEST(HostBackend, HandlesAndGlobalsAreChargedAndFreedWithTheirModule) {
  HostBackend b;
  u64 module = 0, dptr = 0, size = 0;
  ASSERT_EQ(b.module_load(nullptr, 16, module), 0);
  int rc = 0;
  u64 globals = 0;
  for (; globals < 8000 && (rc = b.module_get_global(module, "g" + std::to_string(globals), dptr, size)) == 0; ++globals) {}
  EXPECT_EQ(rc, kErrOutOfMemory);
  EXPECT_LT(globals, kDevice / (64 * 1024));
  u64 free = 0, total = 0;
  ASSERT_EQ(b.mem_get_info(free, total), 0);
  EXPECT_LT(free, 64 * 1024u + 8);
  ASSERT_EQ(b.module_unload(module), 0);
  ASSERT_EQ(b.mem_get_info(free, total), 0);
  EXPECT_EQ(free, total);
  u64 fn = 0, again = 0;
  ASSERT_EQ(b.module_load(nullptr, 16, module), 0);
  ASSERT_EQ(b.module_get_function(module, "f", fn), 0);
  ASSERT_EQ(b.module_get_function(module, "f", again), 0);
  EXPECT_EQ(fn, again);  // the same function, as on a GPU: looking it up again costs nothing
  u64 event = 0, events = 0;
  while (events < kDevice / 256 && b.event_create(0, event) == 0) ++events;
  EXPECT_LT(events, kDevice / 256);
}

// The log of a server that nobody reads: 2000 launches with 4 KiB of arguments (16 MB of hex before).
TEST(HostBackend, CallLogStaysBounded) {
  HostBackend b;
  u64 module = 0, fn = 0;
  ASSERT_EQ(b.module_load(nullptr, 16, module), 0);
  ASSERT_EQ(b.module_get_function(module, "not_a_host_kernel", fn), 0);
  const std::uint32_t grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  std::vector<std::uint8_t> params(4096, 0xab);
  for (int i = 0; i < 2000; ++i) EXPECT_EQ(b.launch(fn, grid, block, 0, 0, params.data(), params.size()), kErrNotSupported);
  const auto calls = b.calls();
  const std::size_t bytes =
      std::accumulate(calls.begin(), calls.end(), std::size_t{0}, [](std::size_t n, const auto& l) { return n + l.size(); });
  EXPECT_LE(bytes, std::size_t{1} << 20);
  EXPECT_EQ(calls.back().rfind("launch not_a_host_kernel grid 1 block 1 params 4096 abab", 0), 0u);
  EXPECT_LT(calls.back().size(), 1024u);  // the arguments' first 256 bytes only
}

}  // namespace
}  // namespace runsnack::cuda
