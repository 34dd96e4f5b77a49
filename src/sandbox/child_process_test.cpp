// ChildProcess::spawn and SpareChild with real processes: what the child gets (pipes, descriptors,
// cgroup) and what a spare must never hold or leave behind.
#include "sandbox/cgroup.hpp"
#include "sandbox/child_process.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

namespace runsnack::exec {
namespace {

std::string read_all(fs::UniqueFd fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd.get(), buf, sizeof(buf))) > 0) out.append(buf, static_cast<std::size_t>(n));
  return out;
}

struct Finished {
  std::string out, err;
  ExitInfo exit;
};

Finished finish(ChildProcess child) {
  Finished f;
  f.out = read_all(child.take_stdout());
  f.err = read_all(child.take_stderr());
  boost::asio::io_context io;
  auto waited = boost::asio::co_spawn(io, child.wait(), boost::asio::use_future);
  io.run();
  f.exit = waited.get();
  return f;
}

SpawnOptions shell(const std::string& script) {
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", script};
  o.envp = {"PATH=/usr/bin:/bin", "GREETING=hello"};
  return o;
}

bool alive(pid_t pid) { return ::kill(pid, 0) == 0; }

std::string cgroup_line_of(const std::string& proc_cgroup_text, const std::string& controller) {
  std::size_t at = 0;
  while (at < proc_cgroup_text.size()) {
    auto end = proc_cgroup_text.find('\n', at);
    std::string line = proc_cgroup_text.substr(at, end - at);
    if (line.find(":" + controller + ":") != std::string::npos || line.rfind("0::", 0) == 0) return line;
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return "";
}

TEST(ChildProcess, SpawnRunsTheCommandWithItsEnvironmentAndExitCode) {
  auto child = ChildProcess::spawn(shell("echo $GREETING; echo oops >&2; exit 7"));
  ASSERT_TRUE(child) << child.error().what();
  auto f = finish(std::move(*child));
  EXPECT_EQ(f.out, "hello\n");
  EXPECT_EQ(f.err, "oops\n");
  EXPECT_EQ(f.exit.status, 7);
}

TEST(SpareChild, RunsTheCommandItIsGivenWithPipesAndPassedDescriptors) {
  auto spare = SpareChild::fork_into({});
  ASSERT_TRUE(spare) << spare.error().what();
  // A descriptor passed as 3, as bwrap's --info-fd or --seccomp is.
  int data = ::memfd_create("spare-test", MFD_CLOEXEC);
  ASSERT_GE(data, 0);
  ASSERT_EQ(::write(data, "from fd 3", 9), 9);
  ::lseek(data, 0, SEEK_SET);
  auto options = shell("echo $GREETING; cat <&3; read line; echo \"stdin:$line:$?\"; echo bad >&2; exit 5");
  options.keep_fds = {data};
  auto child = spare->start(options);
  ::close(data);
  ASSERT_TRUE(child) << child.error().what();
  auto f = finish(std::move(*child));
  EXPECT_EQ(f.out, "hello\nfrom fd 3stdin::1\n");  // stdin is /dev/null: read fails at once
  EXPECT_EQ(f.err, "bad\n");
  EXPECT_EQ(f.exit.status, 5);
  EXPECT_EQ(spare->pid(), -1) << "a started spare is used up";
}

// run's stdin (stdin_pipe): what the parent writes is the child's input, and closing the write
// end is its end of input, whether the child was spawned or started in a spare.
TEST(ChildProcess, StdinPipeCarriesInputAndItsEnd) {
  for (bool in_spare : {false, true}) {
    SCOPED_TRACE(in_spare ? "spare" : "spawn");
    auto options = shell("cat; echo end");
    options.stdin_pipe = true;
    std::optional<SpareChild> spare;
    if (in_spare) {
      auto made = SpareChild::fork_into({});
      ASSERT_TRUE(made) << made.error().what();
      spare.emplace(std::move(*made));
    }
    auto child = in_spare ? spare->start(options) : ChildProcess::spawn(options);
    ASSERT_TRUE(child) << child.error().what();
    fs::UniqueFd in = child->take_stdin();
    ASSERT_TRUE(in);
    ASSERT_EQ(::write(in.get(), "typed\n", 6), 6);
    in = fs::UniqueFd();  // the end of input: cat returns
    auto f = finish(std::move(*child));
    EXPECT_EQ(f.out, "typed\nend\n");
    EXPECT_EQ(f.exit.status, 0);
  }
}

TEST(SpareChild, HoldsNoDescriptorOfItsParent) {
  // A socket or pipe the parent closes must read as closed to its peer: a spare waiting for
  // minutes must not keep a session's connection half open.
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  auto spare = SpareChild::fork_into({});
  ASSERT_TRUE(spare) << spare.error().what();
  ::close(p[1]);
  struct pollfd pfd{p[0], POLLIN, 0};
  ASSERT_EQ(::poll(&pfd, 1, 5000), 1) << "the write end is still open somewhere";
  char c;
  EXPECT_EQ(::read(p[0], &c, 1), 0);
  ::close(p[0]);
  // Nor does the command it runs get more than 0-2 and what it is passed.
  auto child = spare->start(shell("ls /proc/self/fd | sort -n | tr '\\n' ' '"));
  ASSERT_TRUE(child) << child.error().what();
  EXPECT_EQ(finish(std::move(*child)).out, "0 1 2 3 ");  // 3: ls's own directory handle
}

TEST(SpareChild, ADroppedSpareLeavesNoProcess) {
  pid_t pid;
  {
    auto spare = SpareChild::fork_into({});
    ASSERT_TRUE(spare) << spare.error().what();
    pid = spare->pid();
    ASSERT_GT(pid, 0);
    EXPECT_TRUE(alive(pid));
  }
  EXPECT_FALSE(alive(pid)) << "the spare outlived its owner (or is an unreaped zombie)";
}

TEST(SpareChild, ACommandTooLargeForItsPageFailsAndLeavesNothingRunning) {
  auto spare = SpareChild::fork_into({});
  ASSERT_TRUE(spare) << spare.error().what();
  const pid_t pid = spare->pid();
  auto options = shell("true");
  options.envp.push_back("BIG=" + std::string(2 << 20, 'x'));
  auto child = spare->start(options);
  ASSERT_FALSE(child);
  EXPECT_EQ(child.error().code, errc::too_large) << child.error().what();
  EXPECT_FALSE(alive(pid));
}

TEST(SpareChild, ASpareThatDiedFailsToStartWithAClearError) {
  auto spare = SpareChild::fork_into({});
  ASSERT_TRUE(spare) << spare.error().what();
  ASSERT_EQ(::kill(spare->pid(), SIGKILL), 0);
  ::usleep(50'000);
  auto child = spare->start(shell("echo never"));
  ASSERT_FALSE(child);
  EXPECT_NE(child.error().what().find("spare process is gone"), std::string::npos) << child.error().what();
}

// A group of its own for one test, named runsnack-test-WHAT-PID-N, with no limits yet.
Result<Cgroup> fresh_group(const std::string& what) {
  static std::atomic<int> counter{0};
  return Cgroup::create("runsnack-test-" + what + "-" + std::to_string(::getpid()) + "-" + std::to_string(++counter),
                        std::nullopt, std::nullopt);
}

TEST(SpareChild, TheCommandRunsInTheCgroupTheSpareJoinedBeforeTheRequest) {
  auto cgroup = fresh_group("spare");
  if (!cgroup) GTEST_SKIP() << "no writable cgroup here (not root?): " << cgroup.error().what();
  auto spare = SpareChild::fork_into(cgroup->procs_fds());
  ASSERT_TRUE(spare) << spare.error().what();
  // Limits come after the join, as launch_sandboxed() sets a taken spare's: 3 processes at most.
  ASSERT_TRUE(cgroup->set_limits(3, std::nullopt));
  auto child = spare->start(shell("cat /proc/self/cgroup; for i in 1 2 3 4 5; do sleep 1 & done; wait"));
  ASSERT_TRUE(child) << child.error().what();
  auto f = finish(std::move(*child));
  const std::string line = cgroup_line_of(f.out, "pids");
  EXPECT_NE(line.find("runsnack-test-spare-"), std::string::npos) << f.out;
  EXPECT_NE(f.err.find("fork"), std::string::npos) << "pids.max did not bind: " << f.err;
  EXPECT_TRUE(cgroup->limits_hit().processes);  // so the consumer is told which limit (issue 39, item 4)
  EXPECT_FALSE(cgroup->limits_hit().memory);
}

TEST(SpareChild, AKillAtTheMemoryLimitIsKnownAsOne) {
  auto cgroup = fresh_group("oom");
  if (!cgroup) GTEST_SKIP() << "no writable cgroup here (not root?): " << cgroup.error().what();
  auto spare = SpareChild::fork_into(cgroup->procs_fds());
  ASSERT_TRUE(spare) << spare.error().what();
  ASSERT_TRUE(cgroup->set_limits(std::nullopt, 64u << 20));
  auto child = spare->start(shell("exec python3 -c 'x = bytearray(256 << 20); print(len(x))'"));
  ASSERT_TRUE(child) << child.error().what();
  auto f = finish(std::move(*child));
  ASSERT_EQ(f.exit.signal, std::optional<int>(SIGKILL)) << f.out << f.err;
  EXPECT_TRUE(cgroup->limits_hit().memory);
  EXPECT_FALSE(cgroup->limits_hit().processes);
}

TEST(SpareChild, StaleGroupsAreRemovedButNotOnesInUseOrNotNamed) {
  // What a provider killed with SIGKILL leaves (its spare's empty group), as launch.cpp sweeps it.
  const std::string prefix = "runsnack-test-stale-" + std::to_string(::getpid()) + "-";
  auto stale = Cgroup::create(prefix + "dead", std::nullopt, std::nullopt);
  if (!stale) GTEST_SKIP() << "no writable cgroup here (not root?): " << stale.error().what();
  auto busy = Cgroup::create(prefix + "dead-busy", std::nullopt, std::nullopt);
  auto kept = Cgroup::create(prefix + "alive", std::nullopt, std::nullopt);
  ASSERT_TRUE(busy && kept);
  auto spare = SpareChild::fork_into(busy->procs_fds());
  ASSERT_TRUE(spare) << spare.error().what();
  ::usleep(100'000);  // the spare has joined
  Cgroup::remove_stale(prefix, [](const std::string& name) { return name.find("dead") != std::string::npos; });
  EXPECT_FALSE(std::filesystem::exists(stale->usage_dir())) << stale->usage_dir();
  EXPECT_TRUE(std::filesystem::exists(busy->usage_dir())) << "a group with a process in it was removed";
  EXPECT_TRUE(std::filesystem::exists(kept->usage_dir())) << "a group `stale` did not name was removed";
}

}  // namespace
}  // namespace runsnack::exec
