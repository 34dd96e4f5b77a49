#include "provider/admission_audit.hpp"

#include "store/text.hpp"

namespace runsnack {

namespace {
constexpr const char* kOtherAddresses = "(other addresses)";
}

std::optional<AuditEvent> RefusalTally::note(AuditEvent ev, const std::string& address_key) {
  if (!started_) started_ = ev.time;
  std::string key = address_key;
  if (!by_address_.contains(key) && by_address_.size() >= kMaxTallyAddresses) key = kOtherAddresses;
  auto [it, fresh] = by_address_.try_emplace(key);
  if (fresh && key != kOtherAddresses) return ev;  // the first from this address: as it is, at once
  if (!it->second) {
    it->second.emplace();
    it->second->sample = ev;
    it->second->first = ev.time;
  }
  Tally& t = *it->second;
  ++t.count;
  t.last = ev.time;
  // Reasons are cut short so the detail stays under kAuditDetailMaxBytes (it would be replaced whole).
  std::string reason = bounded_text(ev.reason, kMaxTallyReasonBytes);
  if (t.reasons.size() < kMaxTallyReasons || t.reasons.contains(reason)) ++t.reasons[reason];
  return std::nullopt;
}

std::vector<AuditEvent> RefusalTally::due(TimePoint now, bool all) {
  std::vector<AuditEvent> out;
  if (!started_ || (!all && now - *started_ < interval_)) return out;
  for (auto& [key, tally] : by_address_) {
    if (!tally) continue;
    AuditEvent ev = tally->sample;
    ev.time = tally->last;
    ev.address = key;
    ev.decision = "refuse";
    ev.reason = std::to_string(tally->count) + " more refusals from " + key;
    nlohmann::json reasons = nlohmann::json::object();
    for (const auto& [reason, n] : tally->reasons) reasons[reason] = n;
    ev.detail = {{"count", tally->count}, {"first", rfc3339(tally->first)}, {"last", rfc3339(tally->last)},
                 {"reasons", reasons}};
    out.push_back(std::move(ev));
  }
  by_address_.clear();
  started_.reset();
  return out;
}

}  // namespace runsnack
