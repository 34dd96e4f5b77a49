// The scheduler stepped by hand: no clock, no I/O; times are plain seconds.
#include "pool/scheduling/scheduler.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace runsnack::pool::scheduling {
namespace {

using Kind = Decision::Kind;

DeviceProfile device(const std::string& id, double score, double price = 0.1, const std::string& peer = "") {
  return {id, peer.empty() ? "peer-" + id : peer, "net-" + id, score, price};
}

// Runs `n` tasks of `work` on `id` at `speed` work/s so the scheduler learns it.
void teach(Scheduler& s, const std::string& id, double speed, int n, double& now, double work = 100,
           double noise_sd = 0.0, Rng* noise = nullptr) {
  static int counter = 0;
  for (int i = 0; i < n; ++i) {
    std::string task = "warm-" + std::to_string(counter++);
    s.task_started({task, id, "warm", "render", Preference::fast, work}, now);
    double elapsed = work / speed * (noise ? std::exp(noise_sd * noise->normal()) : 1.0);
    now += elapsed;
    s.task_finished({task, id, Outcome::ok, elapsed}, now);
  }
}

PendingJob job(const std::string& id, std::int64_t pending, Preference p = Preference::fast, double work = 100) {
  return {id, "render", p, pending, work};
}

TEST(Scheduler, LearningConvergesToTheTrueSpeed) {
  Scheduler s;
  s.device_joined(device("calibrated", 10), 0);
  s.device_joined(device("throttled", 10), 0);  // calibration says 10, it really does 4
  double now = 0;
  Rng noise(3);
  for (int round = 0; round < 60; ++round) {
    teach(s, "calibrated", 10, 1, now, 100, 0.3, &noise);
    teach(s, "throttled", 4, 1, now, 100, 0.3, &noise);
  }
  auto c = s.estimate("calibrated", "render", 100);
  auto t = s.estimate("throttled", "render", 100);
  ASSERT_TRUE(c && t);
  EXPECT_NEAR(c->task_s, 10, 1.0);
  EXPECT_NEAR(t->task_s, 25, 2.5);
  EXPECT_EQ(t->observations, 60u);
}

TEST(Scheduler, SlowDeviceWorksOnlyWhileThePoolNeedsIt) {
  Scheduler s;
  double now = 0;
  for (int i = 0; i < 10; ++i) s.device_joined(device("fast" + std::to_string(i), 10), now);
  s.device_joined(device("slow", 1), now);
  for (int i = 0; i < 10; ++i) teach(s, "fast" + std::to_string(i), 10, 20, now);
  teach(s, "slow", 1, 20, now);

  std::vector<PendingJob> lots = {job("j", 1000)};
  EXPECT_EQ(s.decide("slow", lots, now).kind, Kind::run);
  // Five tasks left: the fast devices finish them all before the slow one would finish one.
  std::vector<PendingJob> few = {job("j", 5)};
  auto d = s.decide("slow", few, now);
  EXPECT_EQ(d.kind, Kind::wait);
  EXPECT_GE(d.retry_after_s, 1.0);
  EXPECT_EQ(s.decide("fast3", few, now).kind, Kind::run);
  // Unknown devices are told to wait, not refused with an error.
  EXPECT_EQ(s.decide("nobody", few, now).kind, Kind::wait);
}

TEST(Scheduler, NeededDeviceTakesTheLongestTasksFirst) {
  Scheduler s;
  double now = 0;
  s.device_joined(device("a", 10), now);
  teach(s, "a", 10, 10, now);
  std::vector<PendingJob> jobs = {job("short", 100, Preference::fast, 10), job("long", 100, Preference::fast, 500)};
  auto d = s.decide("a", jobs, now);
  EXPECT_EQ(d.kind, Kind::run);
  EXPECT_EQ(d.job, "long");
  EXPECT_NEAR(d.expected_s, 50, 10);
}

TEST(Scheduler, NewDeviceGetsExplored) {
  Scheduler s({}, 11);
  double now = 0;
  for (int i = 0; i < 4; ++i) s.device_joined(device("fast" + std::to_string(i), 10), now);
  s.device_joined(device("known", 4), now);
  for (int i = 0; i < 4; ++i) teach(s, "fast" + std::to_string(i), 10, 50, now);
  teach(s, "known", 4, 50, now);
  // Same calibration as "known" but never observed: its speed is uncertain.
  s.device_joined(device("new", 4), now);
  std::vector<PendingJob> jobs = {job("j", 4)};
  int known_runs = 0, new_runs = 0;
  for (int i = 0; i < 300; ++i) {
    known_runs += s.decide("known", jobs, now).kind == Kind::run;
    new_runs += s.decide("new", jobs, now).kind == Kind::run;
  }
  EXPECT_LE(known_runs, 6);  // confidently slower than needed
  EXPECT_GE(new_runs, 45);   // sometimes drawn fast enough to be tried
}

TEST(Scheduler, FastAndCheapPreferencesPickDifferentPointsOfTheFront) {
  Scheduler s;
  double now = 0;
  for (int i = 0; i < 4; ++i) {
    s.device_joined(device("h100-" + std::to_string(i), 16, 2.0), now);
    s.device_joined(device("rtx4090-" + std::to_string(i), 9.5, 0.35), now);
  }
  for (int i = 0; i < 4; ++i) {
    teach(s, "h100-" + std::to_string(i), 16, 30, now);
    teach(s, "rtx4090-" + std::to_string(i), 9.5, 30, now);
  }
  auto front = s.pareto_front(job("j", 2));
  ASSERT_EQ(front.size(), 2u);  // faster and dearer, slower and cheaper: neither dominates
  std::vector<PendingJob> fast = {job("j", 2, Preference::fast)};
  std::vector<PendingJob> cheap = {job("j", 2, Preference::cheap)};
  EXPECT_EQ(s.decide("h100-0", fast, now).kind, Kind::run);
  EXPECT_EQ(s.decide("rtx4090-0", fast, now).kind, Kind::wait);
  EXPECT_EQ(s.decide("h100-0", cheap, now).kind, Kind::wait);
  EXPECT_EQ(s.decide("rtx4090-0", cheap, now).kind, Kind::run);
}

class Backups : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* id : {"f1", "f2", "f3"}) s.device_joined(device(id, 10), now);
    s.device_joined(device("slow", 1), now);
    s.device_joined(device("f4", 10, 0.1, "peer-slow"), now);  // same machine as "slow"
    for (const char* id : {"f1", "f2", "f3", "f4"}) teach(s, id, 10, 20, now);
    teach(s, "slow", 1, 20, now);
    start = now;
    s.task_started({"t-slow", "slow", "j", "render", Preference::fast, 100}, start);  // ~100 s
    s.task_started({"t-fast", "f1", "j", "render", Preference::fast, 100}, start);    // ~10 s
  }
  Scheduler s;
  double now = 0, start = 0;
};

TEST_F(Backups, OnlyNearTheEndOfAJob) {
  std::vector<PendingJob> pending = {job("j", 3)};
  auto d = s.decide("f2", pending, start + 5);
  EXPECT_EQ(d.kind, Kind::run);  // tasks still pending: work on them, no copies
  auto b = s.decide("f2", {}, start + 5);
  ASSERT_EQ(b.kind, Kind::backup);
  EXPECT_EQ(b.task, "t-slow");
  EXPECT_EQ(b.job, "j");
}

TEST_F(Backups, OnlyForStragglersAndOneCopyEach) {
  s.task_started({"t-slow", "f2", "j", "render", Preference::fast, 100}, start + 5);  // the backup
  // t-slow has its two copies, t-fast will end soon: nothing to copy.
  EXPECT_EQ(s.decide("f3", {}, start + 6).kind, Kind::wait);
  // Not on the straggler's own machine either.
  s.task_finished({"t-slow", "f2", Outcome::cancelled, -1}, start + 7);
  EXPECT_EQ(s.decide("f4", {}, start + 7).kind, Kind::wait);
  EXPECT_EQ(s.decide("f3", {}, start + 7).kind, Kind::backup);
}

TEST_F(Backups, AnOverdueTaskBecomesAStraggler) {
  s.task_finished({"t-slow", "slow", Outcome::ok, -1}, start + 1);  // pretend it is done
  EXPECT_EQ(s.decide("f2", {}, start + 5).kind, Kind::wait);       // t-fast is on time
  auto b = s.decide("f2", {}, start + 40);                          // 4x over its expected 10 s
  ASSERT_EQ(b.kind, Kind::backup);
  EXPECT_EQ(b.task, "t-fast");
}

TEST(Scheduler, UnprovenDeviceWaitsWhileTrustedOnesCanFinish) {
  SchedulerConfig config;
  config.checked_by_computation.clear();  // render results wait for replicas here, like exec
  Scheduler s(config);
  double now = 0;
  for (const char* id : {"t1", "t2", "t3", "t4", "unproven"}) s.device_joined(device(id, 10), now);
  for (const char* id : {"t1", "t2", "t3", "t4", "unproven"}) teach(s, id, 10, 20, now);
  // Its results still need a replica: a task it runs counts only a replica later.
  s.set_verification("unproven", 1.0);
  for (const char* id : {"t1", "t2", "t3", "t4"}) s.set_verification(id, 0.01);
  std::vector<PendingJob> few = {job("j", 2)};
  EXPECT_EQ(s.decide("unproven", few, now).kind, Kind::wait);
  EXPECT_EQ(s.decide("t1", few, now).kind, Kind::run);
  std::vector<PendingJob> lots = {job("j", 500)};
  EXPECT_EQ(s.decide("unproven", lots, now).kind, Kind::run);  // still needed while there is much to do
}

TEST(Scheduler, AWorkloadCheckedOnArrivalDoesNotWaitForReplicas) {
  // Render tiles are checked by re-rendering pixels (Freivalds for matmul): an unproven
  // device's render task counts when it ends, so it is not held back as in the test above.
  Scheduler s;
  double now = 0;
  for (const char* id : {"t1", "t2", "t3", "t4", "unproven"}) s.device_joined(device(id, 10), now);
  for (const char* id : {"t1", "t2", "t3", "t4", "unproven"}) teach(s, id, 10, 20, now);
  s.set_verification("unproven", 1.0);
  for (const char* id : {"t1", "t2", "t3", "t4"}) s.set_verification(id, 0.01);
  std::vector<PendingJob> few = {job("j", 2)};
  EXPECT_EQ(s.decide("unproven", few, now).kind, Kind::run);
}

TEST(Scheduler, StragglerCopyGoesToTheBestIdleDevice) {
  Scheduler s;
  double now = 0;
  s.device_joined(device("slow", 1), now);
  s.device_joined(device("mid", 4), now);
  for (const char* id : {"f1", "f2", "f3"}) s.device_joined(device(id, 10), now);
  teach(s, "slow", 1, 20, now);
  teach(s, "mid", 4, 20, now);
  for (const char* id : {"f1", "f2", "f3"}) teach(s, id, 10, 20, now);
  s.task_started({"t", "slow", "j", "render", Preference::fast, 100}, now);  // ~100 s
  // "mid" would beat the straggler, but three idle devices beat "mid".
  EXPECT_EQ(s.decide("mid", {}, now + 1).kind, Kind::wait);
  auto b = s.decide("f2", {}, now + 1);
  ASSERT_EQ(b.kind, Kind::backup);
  EXPECT_EQ(b.task, "t");
}

TEST(Scheduler, LeavingDeviceLosesItsCopiesAndCounts) {
  Scheduler s;
  double now = 0;
  s.device_joined(device("a", 10), now);
  s.task_started({"t", "a", "j", "render", Preference::fast, 100}, now);
  EXPECT_EQ(s.running_tasks(), 1u);
  s.device_left("a", 50);
  EXPECT_EQ(s.running_tasks(), 0u);
  EXPECT_EQ(s.online_devices(), 0u);
  EXPECT_GT(s.estimate("a", "render", 100)->departure_rate, 1.0 / 3600);
  s.task_finished({"t", "a", Outcome::ok, 10}, 60);  // late report: ignored
  EXPECT_EQ(s.estimate("a", "render", 100)->observations, 0u);
  EXPECT_EQ(s.decide("a", std::vector<PendingJob>{job("j", 1)}, 60).kind, Kind::wait);
}

TEST(Scheduler, SaveAndLoadKeepDecisionsIdentical) {
  Scheduler s({}, 5);
  double now = 0;
  Rng noise(9);
  for (int i = 0; i < 30; ++i) s.device_joined(device("d" + std::to_string(i), 1 + i % 7, 0.05 * (1 + i % 5)), now);
  for (int i = 0; i < 30; ++i) teach(s, "d" + std::to_string(i), 1 + (i * 3) % 7, 3, now, 100, 0.3, &noise);
  s.device_left("d3", now);
  for (int i = 0; i < 10; ++i)
    s.task_started({"r" + std::to_string(i), "d" + std::to_string(i + 10), "j", "render", Preference::fast, 100}, now);
  s.verdict("d12", false);

  auto saved = s.save();
  auto loaded = Scheduler::load(saved);
  ASSERT_TRUE(loaded) << loaded.error().what();
  EXPECT_EQ(loaded->save(), saved);

  // The same calls from here give the same answers, and the same state.
  std::vector<PendingJob> jobs = {job("j", 40, Preference::fast), job("k", 25, Preference::cheap, 30)};
  for (int step = 0; step < 200; ++step) {
    std::string id = "d" + std::to_string(step % 30);
    double t = now + step;
    if (step % 13 == 0) {
      s.task_finished({"r" + std::to_string(step % 10), "d" + std::to_string(step % 10 + 10), Outcome::ok, -1}, t);
      loaded->task_finished({"r" + std::to_string(step % 10), "d" + std::to_string(step % 10 + 10), Outcome::ok, -1}, t);
    }
    auto a = s.decide(id, jobs, t);
    auto b = loaded->decide(id, jobs, t);
    ASSERT_EQ(a.kind, b.kind) << "step " << step;
    EXPECT_EQ(a.job, b.job);
    EXPECT_EQ(a.task, b.task);
    EXPECT_EQ(a.expected_s, b.expected_s);
    EXPECT_EQ(a.retry_after_s, b.retry_after_s);
  }
  EXPECT_EQ(s.save(), loaded->save());

  // After a restart nothing is online or running, but what was learned stays.
  loaded->forget_sessions(now + 300);
  EXPECT_EQ(loaded->online_devices(), 0u);
  EXPECT_EQ(loaded->running_tasks(), 0u);
  EXPECT_EQ(loaded->estimate("d1", "render", 100)->observations, 3u);

  EXPECT_FALSE(Scheduler::load(nlohmann::json::object()));
  auto broken = saved;
  broken["devices"][0]["stats"] = "x";
  EXPECT_FALSE(Scheduler::load(broken));
}

TEST(Scheduler, BadNumbersDoNotBreakIt) {
  Scheduler s;
  s.device_joined(device("a", 0), 0);  // zero score: treated as very slow
  std::vector<PendingJob> jobs = {{"j", "render", Preference::fast, 5, std::nan("")},
                                  {"k", "render", Preference::fast, -3, 10}};
  EXPECT_EQ(s.decide("a", jobs, 1).kind, Kind::wait);
  s.task_started({"t", "a", "j", "render", Preference::fast, -1}, 1);  // refused: no work
  EXPECT_EQ(s.running_tasks(), 0u);
  s.task_started({"t", "a", "j", "render", Preference::fast, 10}, 1);
  s.task_finished({"t", "a", Outcome::ok, 0}, 1);  // zero time: not learned from
  EXPECT_EQ(s.estimate("a", "render", 10)->observations, 0u);
}

}  // namespace
}  // namespace runsnack::pool::scheduling
