// Scheduler::save and Scheduler::load: the learned state, the devices, the
// running copies and the generator, restored exactly (scheduler.hpp).
#include "pool/scheduling/scheduler.hpp"

#include <algorithm>
#include <cmath>

namespace runsnack::pool::scheduling {

using nlohmann::json;

namespace {
constexpr int kStateVersion = 1;
}

json Scheduler::save() const {
  json devices = json::array();
  for (std::uint32_t d = 0; d < devices_.size(); ++d) {
    const auto& dev = devices_[d];
    json placed = json::array();
    if (dev.online)
      for (const auto& m : dev.placed)
        placed.push_back({m.relative_speed, m.price_per_hour, m.success, m.departure_rate, m.verification});
    devices.push_back({{"id", dev.profile.id},
                       {"peer", dev.profile.peer},
                       {"network", dev.profile.network},
                       {"score", dev.profile.score},
                       {"price_per_hour", dev.profile.price_per_hour},
                       {"online", dev.online},
                       {"since", dev.since},
                       {"verification", dev.verification},
                       {"placed", placed},
                       {"stats", est_.save_device(d)}});
  }
  return {{"version", kStateVersion},
          {"rng", rng_.save()},
          {"workloads", est_.save_workloads()},
          {"devices", devices},
          {"running", running_.save()}};
}

Result<Scheduler> Scheduler::load(const json& state, SchedulerConfig config) {
  auto bad = [](const char* what) { return fail(errc::malformed, std::string("scheduler state: ") + what); };
  if (!state.is_object() || !state.contains("version") || state["version"] != kStateVersion)
    return bad("unknown version");
  for (const char* k : {"rng", "workloads", "devices", "running"})
    if (!state.contains(k)) return bad("missing field");
  Scheduler s(config);
  auto rng = Rng::load(state["rng"]);
  if (!rng) return rng.error();
  s.rng_ = *rng;
  if (auto r = s.est_.load_workloads(state["workloads"]); !r) return r.error();
  s.grids_.resize(s.est_.workloads());
  s.mark_checked();
  if (!state["devices"].is_array()) return bad("devices must be an array");
  for (const auto& e : state["devices"]) {
    if (!e.is_object()) return bad("bad device");
    for (const char* k : {"id", "peer", "network"})
      if (!e.contains(k) || !e[k].is_string()) return bad("bad device");
    for (const char* k : {"score", "price_per_hour", "since", "verification"})
      if (!e.contains(k) || !e[k].is_number()) return bad("bad device");
    if (!e.contains("online") || !e["online"].is_boolean() || !e.contains("placed") || !e["placed"].is_array() ||
        !e.contains("stats"))
      return bad("bad device");
    auto d = static_cast<std::uint32_t>(s.devices_.size());
    Device dev;
    dev.profile = {e["id"].get<std::string>(), e["peer"].get<std::string>(), e["network"].get<std::string>(),
                   e["score"].get<double>(), e["price_per_hour"].get<double>()};
    if (!s.index_.emplace(dev.profile.id, d).second) return bad("duplicate device");
    dev.since = e["since"].get<double>();
    dev.verification = e["verification"].get<double>();
    s.devices_.push_back(std::move(dev));
    s.est_.add_device(d, s.devices_[d].profile.score);
    if (auto r = s.est_.load_device(d, e["stats"]); !r) return r.error();
    if (!e["online"].get<bool>()) continue;
    if (e["placed"].size() != s.grids_.size()) return bad("device placement does not match the workloads");
    s.devices_[d].online = true;
    ++s.online_;
    for (std::uint32_t w = 0; w < s.grids_.size(); ++w) {
      const auto& m = e["placed"][w];
      if (!m.is_array() || m.size() != 5 || !std::all_of(m.begin(), m.end(), [](const json& x) { return x.is_number(); }))
        return bad("bad device placement");
      s.place(d, w, {m[0].get<double>(), m[1].get<double>(), m[2].get<double>(), m[3].get<double>(),
                     m[4].get<double>()});
    }
  }
  if (auto r = s.running_.load(state["running"], s.devices_.size(), s.grids_.size()); !r) return r.error();
  bool offline_copy = false;
  s.running_.for_each_copy([&](const std::string& id, const RunningTasks::Task&, const RunningTasks::Copy& c) {
    if (!s.devices_[c.device].online) offline_copy = true;
    else s.devices_[c.device].running.push_back(id);
  });
  if (offline_copy) return bad("a running copy on an offline device");
  for (std::uint32_t d = 0; d < s.devices_.size(); ++d)
    if (s.devices_[d].online) s.mark_busy(d);
  return s;
}

}  // namespace runsnack::pool::scheduling
