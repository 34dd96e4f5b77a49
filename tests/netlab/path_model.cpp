#include "path_model.hpp"

#include <algorithm>
#include <cmath>

namespace netlab {

namespace {
constexpr Nanos kPerMs = 1'000'000;
constexpr Nanos ms(double v) { return static_cast<Nanos>(v * static_cast<double>(kPerMs)); }
}  // namespace

PathModel::PathModel(const PathParams& params, std::uint64_t seed) : params_(params), rng_(seed) {}

void PathModel::set_params(const PathParams& params) {
  params_ = params;
  if (params_.loss <= 0) bad_state_ = false;
}

// Gilbert-Elliott with a lossless good state and a lossy bad state: from good
// a burst starts with probability p, a burst ends with probability r = 1/burst;
// the chain spends p / (p + r) of the packets in bursts, which is `loss`.
bool PathModel::lose_next() {
  const double loss = std::clamp(params_.loss, 0.0, 1.0);
  if (loss <= 0) return false;
  if (params_.loss_burst <= 1 || loss >= 1) return unit_(rng_) < loss;
  const double r = 1.0 / params_.loss_burst;
  const double p = loss * r / (1.0 - loss);
  if (bad_state_) bad_state_ = unit_(rng_) >= r;
  else bad_state_ = unit_(rng_) < p;
  return bad_state_;
}

Nanos PathModel::jitter() {
  if (params_.jitter_ms <= 0) return 0;
  return ms((unit_(rng_) * 2.0 - 1.0) * params_.jitter_ms);
}

Decision PathModel::admit(Nanos now, std::size_t bytes) {
  Decision d;
  if (in_outage(now)) {
    d.fate = Fate::outage;
    return d;
  }
  if (lose_next()) {
    d.fate = Fate::lost;
    return d;
  }
  Nanos sent = now;  // when the last bit leaves the bottleneck
  if (params_.rate_mbit > 0) {
    // The link's own clock may run up to burst_ms behind (credit for idle time), but no frame
    // leaves before it arrived and was sent out whole.
    const Nanos start = std::max(now - ms(params_.burst_ms), link_free_at_);
    const double queue_ms = params_.queue_ms > 0 ? params_.queue_ms : 2 * params_.delay_ms + 5;
    if (start - now > ms(queue_ms)) {
      d.fate = Fate::queue_full;
      return d;
    }
    // bits / (Mbit/s) = microseconds: * 1000 for nanoseconds
    const Nanos tx = static_cast<Nanos>(static_cast<double>(bytes) * 8.0 * 1000.0 / params_.rate_mbit);
    link_free_at_ = start + tx;
    sent = std::max(now + tx, link_free_at_);
  }
  Nanos arrive = sent + ms(params_.delay_ms) + jitter();
  if (params_.reorder > 0 && unit_(rng_) < params_.reorder) {
    const double extra = params_.reorder_ms > 0 ? params_.reorder_ms : std::max(1.0, params_.delay_ms / 2);
    d.reordered = true;
    d.release_at = std::max(arrive, last_release_) + ms(extra);
    return d;  // held back: the in-order packets behind it do not wait for it
  }
  arrive = std::max({arrive, last_release_, now});
  last_release_ = arrive;
  d.release_at = arrive;
  return d;
}

}  // namespace netlab
