// The consumer's path plan stepped by hand: no sockets, a made-up clock.
#include "net/path_plan.hpp"

#include <gtest/gtest.h>

namespace runsnack {
namespace {

using Clock = PathPlan::Clock;
using Kind = PathAction::Kind;
using std::chrono::milliseconds;

const Clock::time_point t0 = Clock::time_point() + std::chrono::hours(1);
const Endpoint lan{"192.0.2.10", 7000}, wan{"198.51.100.7", 7000}, mapped{"198.51.100.7", 41000},
    observed{"198.51.100.7", 52311};

PathAction dial(const Endpoint& e) { return {Kind::dial, e, {}}; }

PathIntroduction intro(bool relay = true) {
  return {{lan, wan}, mapped, observed, t0 + milliseconds(120), relay};
}

TEST(PathPlan, DialsTheLinksCandidatesAtOnce) {
  PathPlan plan({lan, wan}, t0 + milliseconds(15000));
  EXPECT_EQ(plan.start(), (std::vector<PathAction>{dial(lan), dial(wan)}));
  EXPECT_EQ(plan.next_wakeup(), std::nullopt);  // without an introduction nothing is timed
  EXPECT_FALSE(plan.rendezvous_answered());
}

TEST(PathPlan, TheIntroductionAddsNewAddressesOnceAndAPunchAtTheSetMoment) {
  PathPlan plan({lan}, t0 + milliseconds(15000));
  plan.start();
  auto actions = plan.introduced(intro(false), t0 + milliseconds(40));
  // lan is the link's: not dialed again; wan and the mapped port are new.
  EXPECT_EQ(actions, (std::vector<PathAction>{dial(wan), dial(mapped), {Kind::punch, observed, t0 + milliseconds(120)}}));
  EXPECT_TRUE(plan.rendezvous_answered());
  EXPECT_EQ(plan.next_wakeup(), std::nullopt);  // no relay offered
}

TEST(PathPlan, TheRelayJoinsWhenNothingWonSoonAfterThePunch) {
  PathPlan plan({}, t0 + milliseconds(15000));
  plan.start();
  plan.introduced(intro(), t0 + milliseconds(40));
  const auto relay_at = t0 + milliseconds(120) + PathPlan::kRelayAfter;
  EXPECT_EQ(plan.next_wakeup(), relay_at);
  EXPECT_TRUE(plan.tick(relay_at - milliseconds(1)).empty());  // early: nothing yet
  EXPECT_EQ(plan.tick(relay_at), (std::vector<PathAction>{{Kind::open_relay, {}, {}}}));
  EXPECT_EQ(plan.next_wakeup(), std::nullopt);  // once
  EXPECT_TRUE(plan.tick(relay_at + milliseconds(5000)).empty());
}

TEST(PathPlan, NoRelayOnceAPathHasWon) {
  PathPlan plan({lan}, t0 + milliseconds(15000));
  plan.start();
  plan.introduced(intro(), t0 + milliseconds(40));
  plan.won();
  EXPECT_EQ(plan.next_wakeup(), std::nullopt);
  EXPECT_TRUE(plan.tick(t0 + milliseconds(5000)).empty());
}

TEST(PathPlan, AnIntroductionAfterTheWinStartsNothing) {
  PathPlan plan({lan}, t0 + milliseconds(15000));
  plan.start();
  plan.won();
  EXPECT_TRUE(plan.introduced(intro(), t0 + milliseconds(40)).empty());
  EXPECT_TRUE(plan.rendezvous_answered());
  EXPECT_EQ(plan.name(mapped, "direct"), "mapped");  // it still names the path
}

TEST(PathPlan, NothingStartsAtOrAfterTheDeadline) {
  PathPlan late({}, t0 + milliseconds(1000));
  EXPECT_TRUE(late.introduced(intro(), t0 + milliseconds(1000)).empty());

  // The relay's moment would fall after the deadline: it is never due.
  PathPlan plan({}, t0 + milliseconds(1000));
  auto actions = plan.introduced(intro(), t0 + milliseconds(40));
  EXPECT_EQ(actions.size(), 4u);  // the dials and the punch still go
  EXPECT_EQ(plan.next_wakeup(), std::nullopt);
  EXPECT_TRUE(plan.tick(t0 + milliseconds(5000)).empty());
}

TEST(PathPlan, AFailedIntroductionIsAnAnswer) {
  PathPlan plan({lan}, t0 + milliseconds(15000));
  plan.start();
  plan.introduction_failed();
  EXPECT_TRUE(plan.rendezvous_answered());
  EXPECT_EQ(plan.next_wakeup(), std::nullopt);
  EXPECT_EQ(plan.name(lan, "direct"), "direct");
}

TEST(PathPlan, ADirectWinOnTheMappedPortIsNamedMapped) {
  PathPlan plan({wan}, t0 + milliseconds(15000));
  plan.start();
  EXPECT_EQ(plan.name(mapped, "direct"), "direct");  // before the introduction nothing is known
  plan.introduced(intro(), t0 + milliseconds(40));
  EXPECT_EQ(plan.name(mapped, "direct"), "mapped");
  EXPECT_EQ(plan.name(wan, "direct"), "direct");
  EXPECT_EQ(plan.name(observed, "punched"), "punched");
}

TEST(PathPlan, WithoutAnObservedAddressThereIsNoPunch) {
  PathPlan plan({}, t0 + milliseconds(15000));
  PathIntroduction i = intro();
  i.punch_to.reset();
  auto actions = plan.introduced(i, t0 + milliseconds(40));
  for (const auto& a : actions) EXPECT_NE(a.kind, Kind::punch);
  EXPECT_TRUE(plan.next_wakeup().has_value());  // the relay still comes
}

}  // namespace
}  // namespace runsnack
