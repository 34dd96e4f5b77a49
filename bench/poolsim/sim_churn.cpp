#include "sim_state.hpp"

#include <algorithm>

namespace poolsim::detail {

void Sim::join(int slot, int identity) {
  int d = slot_device_[slot];
  if (d < 0 || devices_[d].identity != identity) {
    Device dev;
    dev.spec = device_spec(c_, slot, identity);
    dev.slot = slot;
    dev.identity = identity;
    dev.peer = peers_.try_emplace(dev.spec.peer, static_cast<int>(peers_.size())).first->second;
    dev.network = networks_.try_emplace(dev.spec.network, static_cast<int>(networks_.size())).first->second;
    d = static_cast<int>(devices_.size());
    devices_.push_back(std::move(dev));
    slot_device_[slot] = d;
    // A record from before the simulation (honest: a turned cheater behaved until now).
    auto& fresh = devices_[d];
    trust_.device_seen(fresh.spec.id, {fresh.spec.peer, fresh.spec.network});
    for (int i = 0; i < fresh.spec.history; ++i) {
      if (trust_.known_answer_now(fresh.spec.id)) trust_.record(fresh.spec.id, Verdict::valid);
      trust_.record(fresh.spec.id, trust_.replicate(fresh.spec.id) ? Verdict::valid : Verdict::unchecked);
    }
  }
  auto& dev = devices_[d];
  if (dev.excluded) {  // gone for good: its slot gets a new device later
    push(now_ + exp_draw(mix(c_.seed, 0x4e9, slot, identity), c_.replace_s), Ev::join, slot, identity + 1);
    return;
  }
  if (dev.known) notice_departure(d);  // back before its departure was noticed
  dev.present = true;
  dev.known = true;
  dev.since = now_;
  policy_.device_joined({dev.spec.id, dev.spec.peer, dev.spec.network, dev.spec.score, dev.spec.price_per_hour}, now_);
  policy_.verification(dev.spec.id, trust_.replica_probability(dev.spec.id));
  double session = exp_draw(mix(c_.seed, 0x5e55, slot * 1000003ULL + identity, dev.session++), dev.spec.session_s);
  push(now_ + session, Ev::leave, slot, static_cast<std::uint32_t>(identity));
  poll_soon(d, unit(mix(c_.seed, 0x9011, d, dev.session)));
}

void Sim::leave(int slot, int identity) {
  int d = slot_device_[slot];
  if (d < 0 || devices_[d].identity != identity) return;
  auto& dev = devices_[d];
  const std::uint64_t k = mix(c_.seed, 0x1ea7e, slot * 1000003ULL + identity, dev.session);
  if (dev.excluded) {
    push(now_ + exp_draw(k ^ 1, c_.replace_s), Ev::join, slot, identity + 1);
    return;
  }
  if (!dev.present) return;
  dev.present = false;
  dev.epoch += 1;
  dev.online.push_back({dev.since, now_});
  if (dev.attempt >= 0) {  // the run dies with the device; the coordinator notices later
    auto& a = attempts_[dev.attempt];
    a.stop = now_;
    a.fate = Fate::lost;
  }
  double notice = unit(k ^ 2) < c_.graceful_share ? 1.0 : c_.lease_s;
  push(now_ + notice, Ev::detect, d, dev.epoch);
  if (unit(k ^ 3) < c_.return_share)
    push(now_ + exp_draw(k ^ 4, c_.offline_s), Ev::join, slot, identity);
  else
    push(now_ + exp_draw(k ^ 5, c_.replace_s), Ev::join, slot, identity + 1);
}

void Sim::notice_departure(int d) {
  auto& dev = devices_[d];
  if (!dev.known) return;
  dev.known = false;
  policy_.device_left(dev.spec.id, now_);
  if (dev.attempt >= 0) {
    int a = dev.attempt;
    dev.attempt = -1;
    auto& q = requests_[attempts_[a].request];
    q.attempts.erase(std::find(q.attempts.begin(), q.attempts.end(), a));
    if (!q.done && q.attempts.empty()) requeue(attempts_[a].request);
  }
}

void Sim::exclude(int d) {
  auto& dev = devices_[d];
  dev.excluded = true;
  (dev.spec.cheater ? cheaters_excluded_ : honest_excluded_) += 1;
  if (dev.present) {
    dev.present = false;
    dev.epoch += 1;
    dev.online.push_back({dev.since, now_});
    if (dev.attempt >= 0) {
      attempts_[dev.attempt].stop = now_;
      attempts_[dev.attempt].fate = Fate::lost;
    }
  }
  notice_departure(d);
}

bool Sim::eligible(int d, const Request& r) const {
  // TrustPolicy::may_replicate_on's rule (another peer and another network), on interned ids.
  const auto& me = devices_[d];
  if (r.needs_vouched && !vouched(d)) return false;
  for (int p : r.producers) {
    const auto& o = devices_[p];
    if (p == d || o.peer == me.peer || o.network == me.network) return false;
  }
  return true;
}

}  // namespace poolsim::detail
