#include "consumer/reconnect_plan.hpp"

#include <gtest/gtest.h>

namespace runsnack {
namespace {

using namespace std::chrono_literals;
using Action = ReconnectPlan::Action;
using Time = ReconnectPlan::Time;

const Time t0 = Time{} + 1000s;

ReconnectPolicy policy(int max_in_flight = 3) {
  ReconnectPolicy p;
  p.every = 1000ms;
  p.max_in_flight = max_in_flight;
  return p;
}

TEST(ReconnectPlan, StartsAtOnceThenOneAttemptPerInterval) {
  ReconnectPlan plan(policy(), t0 + 60s);
  EXPECT_EQ(plan.next(t0, false).action, Action::start_attempt);
  auto wait = plan.next(t0, false);
  EXPECT_EQ(wait.action, Action::wait);
  EXPECT_EQ(wait.until, t0 + 1000ms);
  EXPECT_EQ(plan.next(t0 + 999ms, false).action, Action::wait);
  EXPECT_EQ(plan.next(t0 + 1000ms, false).action, Action::start_attempt);
  EXPECT_EQ(plan.in_flight(), 2);
}

TEST(ReconnectPlan, CapsAttemptsInFlightUntilOneEnds) {
  ReconnectPlan plan(policy(2), t0 + 60s);
  EXPECT_EQ(plan.next(t0, false).action, Action::start_attempt);
  EXPECT_EQ(plan.next(t0 + 1s, false).action, Action::start_attempt);
  auto capped = plan.next(t0 + 5s, false);
  EXPECT_EQ(capped.action, Action::wait);
  EXPECT_EQ(capped.until, t0 + 60s);  // only an attempt's end or giving up changes anything
  plan.failed(Error(errc::timeout, "no answer"));
  EXPECT_EQ(plan.next(t0 + 5s, false).action, Action::start_attempt);
  EXPECT_EQ(plan.in_flight(), 2);
}

TEST(ReconnectPlan, TransientFailuresKeepTryingAndTheLastIsReportedAtGiveUp) {
  ReconnectPlan plan(policy(), t0 + 3s);
  Time now = t0;
  int started = 0;
  while (true) {
    auto step = plan.next(now, false);
    if (step.action == Action::finished) break;
    if (step.action == Action::start_attempt) {
      ++started;
      plan.failed(Error(errc::io_error, "cannot reach the provider (" + std::to_string(started) + ")"));
      continue;
    }
    now = step.until;
  }
  EXPECT_EQ(started, 3);  // at 0, 1 and 2 s; at 3 s it gives up
  EXPECT_FALSE(plan.has_winner());
  EXPECT_TRUE(plan.failure().is(errc::io_error));
  EXPECT_EQ(plan.failure().what(), "cannot reach the provider (3)");
}

TEST(ReconnectPlan, ARefusalIsFinalEvenWithAttemptsRunning) {
  ReconnectPlan plan(policy(), t0 + 60s);
  plan.next(t0, false);
  plan.next(t0 + 1s, false);
  plan.failed(Error(errc::revoked, "the link was revoked"));
  EXPECT_EQ(plan.next(t0 + 1s, false).action, Action::finished);
  EXPECT_TRUE(plan.failure().is(errc::revoked));
  plan.failed(Error(errc::timeout, "late"));  // the other attempt ends after: the refusal stays the answer
  EXPECT_TRUE(plan.failure().is(errc::revoked));
}

// After a loss the lost session may hold the link's only place on the provider until the provider's
// keepalive lets it go: with retry_when_full "too many sessions" is tried again; revoked is final.
TEST(ReconnectPlan, AFullProviderIsTriedAgainWhenAsked) {
  for (bool retry : {false, true}) {
    ReconnectPolicy p = policy();
    p.retry_when_full = retry;
    ReconnectPlan plan(p, t0 + 60s);
    plan.next(t0, false);
    plan.failed(Error(errc::exhausted, "too many sessions on this link (1 allowed at once)"));
    EXPECT_EQ(plan.next(t0 + 1s, false).action, retry ? Action::start_attempt : Action::finished);
    if (!retry) {
      EXPECT_TRUE(plan.failure().is(errc::exhausted));
      continue;
    }
    plan.failed(Error(errc::revoked, "the link was revoked"));
    EXPECT_EQ(plan.next(t0 + 1s, false).action, Action::finished);
    EXPECT_TRUE(plan.failure().is(errc::revoked));
  }
}

TEST(ReconnectPlan, TheFirstSessionWinsAndLaterOnesAreNotTaken) {
  ReconnectPlan plan(policy(), t0 + 60s);
  plan.next(t0, false);
  plan.next(t0 + 1s, false);
  plan.won();
  EXPECT_TRUE(plan.has_winner());
  EXPECT_EQ(plan.next(t0 + 1s, false).action, Action::finished);
  EXPECT_EQ(plan.in_flight(), 1);  // the other is still out; its session, if any, is closed by the caller
}

TEST(ReconnectPlan, StopEndsItWithStopped) {
  ReconnectPlan plan(policy(), Time::max());
  plan.next(t0, false);
  plan.failed(Error(errc::timeout, "no answer"));
  EXPECT_EQ(plan.next(t0 + 500ms, true).action, Action::finished);
  EXPECT_TRUE(plan.failure().is(errc::closed));
  EXPECT_EQ(plan.failure().what(), "stopped");
}

TEST(ReconnectPlan, WhichErrorsAreWorthAnotherAttempt) {
  for (errc e : {errc::timeout, errc::io_error, errc::closed, errc::malformed, errc::too_large})
    EXPECT_TRUE(transient_connect_error(Error(e, "x"))) << static_cast<int>(e);
  for (errc e : {errc::revoked, errc::expired, errc::exhausted, errc::refused, errc::auth_failed, errc::peer_mismatch,
                 errc::not_found, errc::invalid_argument, errc::unsupported, errc::internal})
    EXPECT_FALSE(transient_connect_error(Error(e, "x"))) << static_cast<int>(e);
}

}  // namespace
}  // namespace runsnack
