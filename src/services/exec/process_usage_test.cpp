// A command's usage from /proc (a stand-in folder, then the real one) and from a cgroup's files.
#include "services/exec/process_usage.hpp"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <random>

namespace runsnack::exec {
namespace {

namespace sfs = std::filesystem;

class FakeProc : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = sfs::temp_directory_path() / ("process_usage_test." + std::to_string(::getpid()) + "." +
                                         std::to_string(std::random_device{}()));
    sfs::create_directories(dir_);
  }
  void TearDown() override { sfs::remove_all(dir_); }
  // utime/stime/cutime/cstime in clock ticks; resident in pages.
  void process(pid_t pid, pid_t ppid, const std::string& comm, long ticks, long resident_pages) {
    sfs::create_directories(dir_ / std::to_string(pid));
    std::ofstream(dir_ / std::to_string(pid) / "stat")
        << pid << " (" << comm << ") S " << ppid << " 1 1 0 -1 4194304 0 0 0 0 " << ticks << " 0 0 0 20 0 1 0";
    std::ofstream(dir_ / std::to_string(pid) / "statm") << 1000 << " " << resident_pages << " 0 0 0 0 0";
  }
  sfs::path dir_;
};

std::vector<pid_t> pids_of(const std::vector<ProcessInfo>& v) {
  std::vector<pid_t> out;
  for (const auto& p : v) out.push_back(p.pid);
  std::sort(out.begin(), out.end());
  return out;
}

TEST_F(FakeProc, TreeSumsCpuAndMemoryOfTheRootAndItsDescendantsOnly) {
  const long tick = ::sysconf(_SC_CLK_TCK);
  const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  process(1, 0, "init", 5, 10);
  process(100, 1, "bwrap", 1 * tick, 100);        // the sandbox's outermost process
  process(101, 100, "bwrap", 0, 50);              // its pid namespace's init
  process(102, 101, "python3 ) 9 9 9", 2 * tick, 1000);  // a comm that tries to shift the fields
  process(103, 102, "child", 3 * tick, 2000);
  process(200, 1, "other", 7 * tick, 9999);       // not the command's
  std::ofstream(dir_ / "self") << "not a pid";
  sfs::create_directories(dir_ / "12x");

  const auto all = read_processes(dir_);
  EXPECT_EQ(pids_of(all), (std::vector<pid_t>{1, 100, 101, 102, 103, 200}));
  EXPECT_EQ(pids_of(process_tree(all, 100)), (std::vector<pid_t>{100, 101, 102, 103}));
  EXPECT_TRUE(process_tree(all, 4242).empty());

  const CommandUsage u = command_usage(all, 100, {});
  ASSERT_TRUE(u.cpu_seconds && u.memory_bytes);
  EXPECT_DOUBLE_EQ(*u.cpu_seconds, 6.0);
  EXPECT_EQ(*u.memory_bytes, (100 + 50 + 1000 + 2000) * page);
  EXPECT_EQ(u.pids.size(), 4u);

  const CommandUsage gone = command_usage(all, 4242, {});
  EXPECT_FALSE(gone.cpu_seconds);
  EXPECT_FALSE(gone.memory_bytes);
}

TEST_F(FakeProc, ACycleOrGarbageDoesNotHangOrCrash) {
  process(10, 11, "a", 1, 1);
  process(11, 10, "b", 1, 1);
  sfs::create_directories(dir_ / "12");
  std::ofstream(dir_ / "12" / "stat") << "12 (truncated";
  sfs::create_directories(dir_ / "13");
  std::ofstream(dir_ / "13" / "stat") << "13 (x) S";
  const auto all = read_processes(dir_);
  EXPECT_EQ(pids_of(all), (std::vector<pid_t>{10, 11}));
  EXPECT_EQ(process_tree(all, 10).size(), 2u);
}

TEST_F(FakeProc, CgroupFilesWinOverTheTree) {
  process(100, 1, "bwrap", 0, 1);
  const sfs::path v2 = dir_ / "cg2", v1 = dir_ / "cg1";
  sfs::create_directories(v2);
  sfs::create_directories(v1);
  std::ofstream(v2 / "cpu.stat") << "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n";
  std::ofstream(v2 / "memory.current") << "67108864\n";
  std::ofstream(v1 / "memory.usage_in_bytes") << "1048576\n";
  const auto all = read_processes(dir_);
  const CommandUsage a = command_usage(all, 100, v2);
  EXPECT_DOUBLE_EQ(a.cpu_seconds.value_or(-1), 2.5);
  EXPECT_EQ(a.memory_bytes.value_or(0), 67108864u);
  const CommandUsage b = command_usage(all, 100, v1);  // v1: memory from the group, CPU from the tree
  EXPECT_EQ(b.memory_bytes.value_or(0), 1048576u);
  EXPECT_DOUBLE_EQ(b.cpu_seconds.value_or(-1), 0.0);
  const CommandUsage c = command_usage(all, 100, dir_ / "no-such-group");
  EXPECT_TRUE(c.cpu_seconds && c.memory_bytes);  // the tree's
}

TEST(ProcessUsage, RealChildThatBurnsCpuAndHoldsMemory) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    // 32 MB touched, then CPU until killed.
    std::vector<char> block(32 << 20, 1);
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    volatile unsigned x = 0;
    while (std::chrono::steady_clock::now() < until) x = x + block[x % block.size()];
    (void)!::write(ready[1], "r", 1);
    for (;;) x = x + 1;
  }
  ::close(ready[1]);
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  const auto all = read_processes();
  const CommandUsage u = command_usage(all, child, {});
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ASSERT_TRUE(u.cpu_seconds && u.memory_bytes);
  EXPECT_GT(*u.cpu_seconds, 0.0);
  EXPECT_GE(*u.memory_bytes, 30u << 20);
  EXPECT_EQ(u.pids, std::vector<pid_t>{child});
}

}  // namespace
}  // namespace runsnack::exec
