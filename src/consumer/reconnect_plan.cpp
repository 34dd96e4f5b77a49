#include "consumer/reconnect_plan.hpp"

#include <algorithm>

namespace runsnack {

bool transient_connect_error(const Error& e) {
  return e.is(errc::timeout) || e.is(errc::io_error) || e.is(errc::closed) || e.is(errc::malformed) ||
         e.is(errc::too_large);
}

ReconnectPlan::Step ReconnectPlan::next(Time now, bool stop) {
  if (stop) stopped_ = true;
  if (won_ || refusal_ || stopped_ || now >= give_up_) {
    finished_ = true;
    return {Action::finished, now};
  }
  const bool may_start = in_flight_ < policy_.max_in_flight;
  if (may_start && (!next_attempt_ || now >= *next_attempt_)) {
    ++in_flight_;
    next_attempt_ = now + policy_.every;
    return {Action::start_attempt, now};
  }
  // At the cap only an attempt's end (or giving up) changes anything.
  return {Action::wait, may_start ? std::min(*next_attempt_, give_up_) : give_up_};
}

void ReconnectPlan::won() {
  --in_flight_;
  if (!finished_) won_ = true;
}

bool ReconnectPlan::retried(const Error& e) const {
  return transient_connect_error(e) || (policy_.retry_when_full && e.is(errc::exhausted));
}

void ReconnectPlan::failed(const Error& e) {
  --in_flight_;
  if (retried(e)) last_error_ = e;
  else if (!refusal_) refusal_ = e;
}

Error ReconnectPlan::failure() const {
  if (refusal_) return *refusal_;
  if (stopped_) return Error(errc::closed, "stopped");
  if (last_error_) return *last_error_;
  return Error(errc::timeout, "the provider could not be reached again");
}

}  // namespace runsnack
