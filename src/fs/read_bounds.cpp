#include "fs/read_bounds.hpp"

#include <sys/stat.h>
#include <sys/vfs.h>

#include <atomic>
#include <cstdio>

namespace runsnack::fs {

namespace {

std::atomic<bool> g_all_stopped{false};

// statfs f_type of ZFS: st_blocks counts compressed blocks, and zero blocks are holes it reports.
constexpr long kZfsMagic = 0x2fc12fc1;

std::uint64_t cost_bound(std::uint64_t allocated) {
  if (allocated >= (UINT64_MAX - kUnseenHoleSlack) / kUnseenHoleFactor) return UINT64_MAX;
  return allocated * kUnseenHoleFactor + kUnseenHoleSlack;
}

}  // namespace

bool ReadBounds::stopped() const { return stop.stop_requested() || all_file_work_stopped(); }

Error ReadBounds::stopped_error() const {
  return Error(errc::closed, all_file_work_stopped() ? "stopped: the provider is stopping"
                                                     : "stopped: the consumer went away");
}

void stop_all_file_work() { g_all_stopped.store(true, std::memory_order_relaxed); }
bool all_file_work_stopped() { return g_all_stopped.load(std::memory_order_relaxed); }

std::string binary_size_text(std::uint64_t bytes) {
  static const char* const kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1024 && unit < 6) v /= 1024, ++unit;
  char buf[32];
  std::snprintf(buf, sizeof buf, v < 10 && v != static_cast<double>(static_cast<std::uint64_t>(v)) ? "%.1f %s" : "%.0f %s",
                v, kUnits[unit]);
  return buf;
}

Result<void> check_unseen_holes(std::uint64_t size, std::uint64_t allocated, DataRun first) {
  if (first.end < size || first.begin >= size) return {};  // holes reported, or nothing but a hole
  const std::uint64_t to_read = size - first.begin;
  if (to_read <= cost_bound(allocated)) return {};
  return fail(errc::refused, "sparse file of " + binary_size_text(size) + " with " + binary_size_text(allocated) +
                                   " allocated: its filesystem does not show where the holes are, so sending it "
                                   "would read all " + binary_size_text(to_read) +
                                   " (a file may cost at most twice what it holds plus " +
                                   binary_size_text(kUnseenHoleSlack) +
                                   "); pack it first (e.g. tar -cSzf FILE.tgz FILE) or copy out only what it holds");
}

Result<void> check_unseen_holes(int fd, const struct stat& st) {
  const std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
  const std::uint64_t allocated = static_cast<std::uint64_t>(st.st_blocks) * 512;
  if (cost_bound(allocated) >= size) return {};  // cheap whatever the holes
  struct statfs fs{};
  if (::fstatfs(fd, &fs) == 0 && static_cast<long>(fs.f_type) == kZfsMagic) return {};
  return check_unseen_holes(size, allocated, next_data(fd, 0, size));
}

}  // namespace runsnack::fs
