#include "pool/scheduling/trust_policy.hpp"

#include <algorithm>

namespace runsnack::pool::scheduling {

using nlohmann::json;

bool independent(const Placement& a, const Placement& b) { return a.peer != b.peer && a.network != b.network; }

TrustPolicy::TrustPolicy(TrustConfig config, std::uint64_t seed) : config_(config), rng_(seed) {}

TrustPolicy::Record& TrustPolicy::at(const std::string& device) { return records_[device]; }

const TrustPolicy::Record* TrustPolicy::find(const std::string& device) const {
  auto it = records_.find(device);
  return it == records_.end() ? nullptr : &it->second;
}

void TrustPolicy::device_seen(const std::string& device, const Placement& where) { at(device).where = where; }

bool TrustPolicy::known_answer_now(const std::string& device) {
  auto& r = at(device);
  const auto window = static_cast<std::uint32_t>(std::max(config_.known_answer_window, 0));
  const auto wanted = static_cast<std::uint32_t>(std::max(config_.known_answer_tasks, 0));
  if (r.claims >= window) return false;
  // The known-answer tasks sit at uniformly random positions among the first
  // `window` claims: each claim gets one with probability owed / claims left.
  const std::uint32_t left = window - r.claims;
  const std::uint32_t owed = wanted > r.known_answers ? wanted - r.known_answers : 0;
  r.claims += 1;
  if (owed == 0) return false;
  bool give = owed >= left || rng_.uniform() * left < owed;
  if (give) r.known_answers += 1;
  return give;
}

double TrustPolicy::replica_probability(const std::string& device) const {
  const auto* r = find(device);
  if (!r || r->run < static_cast<std::uint64_t>(std::max(config_.proving_run, 0))) return 1.0;
  double p = config_.falloff / static_cast<double>(std::max<std::uint64_t>(r->run, 1));
  return std::clamp(p, config_.min_probability, 1.0);
}

bool TrustPolicy::replicate(const std::string& device) {
  double p = replica_probability(device);
  if (p >= 1.0) return true;
  return rng_.uniform() < p;
}

bool TrustPolicy::may_replicate_on(const std::string& original, const std::string& candidate) const {
  const auto* a = find(original);
  const auto* b = find(candidate);
  if (!a || !b || original == candidate) return false;
  return independent(a->where, b->where);
}

TrustPolicy::RecordOutcome TrustPolicy::record(const std::string& device, Verdict v) {
  auto& r = at(device);
  RecordOutcome out;
  switch (v) {
    case Verdict::valid:
      r.valid += 1;
      r.run += 1;
      break;
    case Verdict::unchecked:
      r.unchecked += 1;
      r.run += 1;
      break;
    case Verdict::invalid:
      r.invalid += 1;
      r.run = 0;
      out.reset = true;
      out.audit = true;
      if (!r.excluded && r.invalid >= static_cast<std::uint64_t>(std::max(config_.exclude_after_invalid, 1))) {
        r.excluded = true;
        out.excluded = true;
      }
      break;
  }
  return out;
}

bool TrustPolicy::excluded(const std::string& device) const {
  const auto* r = find(device);
  return r && r->excluded;
}

json TrustPolicy::save() const {
  json devices = json::array();
  for (const auto& [id, r] : records_)
    devices.push_back({{"id", id},
                       {"peer", r.where.peer},
                       {"network", r.where.network},
                       {"run", r.run},
                       {"valid", r.valid},
                       {"invalid", r.invalid},
                       {"unchecked", r.unchecked},
                       {"claims", r.claims},
                       {"known_answers", r.known_answers},
                       {"excluded", r.excluded}});
  return {{"version", 1}, {"rng", rng_.save()}, {"devices", devices}};
}

Result<TrustPolicy> TrustPolicy::load(const json& state, TrustConfig config) {
  auto bad = [] { return fail(errc::malformed, "trust state: bad or missing field"); };
  if (!state.is_object() || !state.contains("version") || state["version"] != 1 || !state.contains("rng") ||
      !state.contains("devices") || !state["devices"].is_array())
    return bad();
  TrustPolicy t(config);
  auto rng = Rng::load(state["rng"]);
  if (!rng) return rng.error();
  t.rng_ = *rng;
  for (const auto& e : state["devices"]) {
    if (!e.is_object()) return bad();
    for (const char* k : {"id", "peer", "network"})
      if (!e.contains(k) || !e[k].is_string()) return bad();
    for (const char* k : {"run", "valid", "invalid", "unchecked", "claims", "known_answers"})
      if (!e.contains(k) || !e[k].is_number_unsigned()) return bad();
    if (!e.contains("excluded") || !e["excluded"].is_boolean()) return bad();
    Record r;
    r.where = {e["peer"].get<std::string>(), e["network"].get<std::string>()};
    r.run = e["run"].get<std::uint64_t>();
    r.valid = e["valid"].get<std::uint64_t>();
    r.invalid = e["invalid"].get<std::uint64_t>();
    r.unchecked = e["unchecked"].get<std::uint64_t>();
    r.claims = e["claims"].get<std::uint32_t>();
    r.known_answers = e["known_answers"].get<std::uint32_t>();
    r.excluded = e["excluded"].get<bool>();
    if (!t.records_.emplace(e["id"].get<std::string>(), r).second) return bad();
  }
  return t;
}

}  // namespace runsnack::pool::scheduling
