#include "pool/scheduling/estimator.hpp"

#include <algorithm>
#include <cmath>

namespace runsnack::pool::scheduling {

using nlohmann::json;

std::uint32_t Estimator::add_workload(std::string_view name, double typical_work, double mean_log_score) {
  if (auto w = find_workload(name)) return *w;
  Workload wl;
  wl.name = std::string(name);
  // Before anything is observed: a typical task takes default_task_s on a
  // device of the mean score. Only the first few observations lean on it.
  wl.prior = std::log(std::max(typical_work, 1e-12) / config_.default_task_s) - mean_log_score;
  workloads_.push_back(std::move(wl));
  return static_cast<std::uint32_t>(workloads_.size() - 1);
}

std::optional<std::uint32_t> Estimator::find_workload(std::string_view name) const {
  for (std::size_t i = 0; i < workloads_.size(); ++i)
    if (workloads_[i].name == name) return static_cast<std::uint32_t>(i);
  return std::nullopt;
}

double Estimator::log_unit(std::uint32_t w) const {
  const auto& wl = workloads_[w];
  return (wl.prior + wl.sum_y) / (1.0 + static_cast<double>(wl.n));
}

double Estimator::spread(std::uint32_t w) const {
  const auto& wl = workloads_[w];
  const double prior = config_.observation_sd * config_.observation_sd;
  return std::sqrt((prior * 4.0 + wl.sum_sq_resid) / (4.0 + static_cast<double>(wl.n)));
}

void Estimator::add_device(std::uint32_t d, double score) {
  if (d >= devices_.size()) devices_.resize(d + 1);
  devices_[d].log_score = std::log(std::max(score, 1e-12));
}

void Estimator::set_score(std::uint32_t d, double score) { devices_[d].log_score = std::log(std::max(score, 1e-12)); }

void Estimator::observe_speed(std::uint32_t d, std::uint32_t w, double work, double elapsed_s) {
  if (!(work > 0) || !(elapsed_s > 0) || !std::isfinite(work) || !std::isfinite(elapsed_s)) return;
  auto& dev = devices_[d];
  double y = std::log(work / elapsed_s) - dev.log_score;
  double resid = y - log_unit(w) - offset_mean(d, w);
  workloads_[w].sum_sq_resid += resid * resid;
  if (dev.speed.size() <= w) dev.speed.resize(w + 1);
  dev.speed[w].n += 1;
  dev.speed[w].sum_y += y;
  workloads_[w].n += 1;
  workloads_[w].sum_y += y;
}

void Estimator::observe_success(std::uint32_t d) { devices_[d].counts.ok += 1; }
void Estimator::observe_failure(std::uint32_t d) { devices_[d].counts.failed += 1; }
void Estimator::observe_invalid(std::uint32_t d, bool retract_success) {
  auto& c = devices_[d].counts;
  if (retract_success && c.ok > 0) c.ok -= 1;
  c.invalid += 1;
}

void Estimator::observe_session(std::uint32_t d, double online_s, bool departed) {
  auto& c = devices_[d].counts;
  if (online_s > 0 && std::isfinite(online_s)) c.online_s += online_s;
  if (departed) c.departures += 1;
}

const Estimator::SpeedStats* Estimator::stats(std::uint32_t d, std::uint32_t w) const {
  const auto& dev = devices_[d];
  return w < dev.speed.size() && dev.speed[w].n > 0 ? &dev.speed[w] : nullptr;
}

double Estimator::device_prior_mean(std::uint32_t d, std::uint32_t except) const {
  // The device's mean offset over its other workloads, shrunk towards 0.
  const auto& dev = devices_[d];
  double sum = 0, n = 0;
  for (std::size_t w = 0; w < dev.speed.size(); ++w) {
    if (dev.speed[w].n == 0 || w == except) continue;
    sum += dev.speed[w].sum_y - dev.speed[w].n * log_unit(static_cast<std::uint32_t>(w));
    n += dev.speed[w].n;
  }
  return sum / (n + config_.device_prior_weight);
}

double Estimator::offset_mean(std::uint32_t d, std::uint32_t w) const {
  const double prior_prec = 1.0 / (config_.prior_speed_sd * config_.prior_speed_sd);
  const double obs_prec = 1.0 / (config_.observation_sd * config_.observation_sd);
  double m = device_prior_mean(d, w);
  const auto* s = stats(d, w);
  if (!s) return m;
  double resid = s->sum_y - s->n * log_unit(w);
  return (m * prior_prec + resid * obs_prec) / (prior_prec + s->n * obs_prec);
}

double Estimator::offset_sd(std::uint32_t d, std::uint32_t w) const {
  const double prior_prec = 1.0 / (config_.prior_speed_sd * config_.prior_speed_sd);
  const double obs_prec = 1.0 / (config_.observation_sd * config_.observation_sd);
  const auto* s = stats(d, w);
  return 1.0 / std::sqrt(prior_prec + (s ? s->n : 0) * obs_prec);
}

std::uint32_t Estimator::observations(std::uint32_t d, std::uint32_t w) const {
  const auto* s = stats(d, w);
  return s ? s->n : 0;
}

double Estimator::relative_speed(std::uint32_t d, std::uint32_t w) const {
  return std::exp(devices_[d].log_score + offset_mean(d, w));
}

double Estimator::task_seconds(std::uint32_t d, std::uint32_t w, double work) const {
  return work / std::exp(devices_[d].log_score + log_unit(w) + offset_mean(d, w));
}

double Estimator::sample_offset(std::uint32_t d, std::uint32_t w, Rng& rng) const {
  return offset_mean(d, w) + offset_sd(d, w) * rng.normal();
}

double Estimator::task_seconds_at(std::uint32_t d, std::uint32_t w, double work, double offset) const {
  return work / std::exp(devices_[d].log_score + log_unit(w) + offset);
}

double Estimator::alpha(std::uint32_t d) const {
  return config_.prior_success * config_.prior_strength + static_cast<double>(devices_[d].counts.ok);
}

double Estimator::beta(std::uint32_t d) const {
  const auto& c = devices_[d].counts;
  return (1.0 - config_.prior_success) * config_.prior_strength + static_cast<double>(c.failed + c.invalid);
}

double Estimator::success_mean(std::uint32_t d) const { return alpha(d) / (alpha(d) + beta(d)); }

double Estimator::sample_success(std::uint32_t d, Rng& rng) const { return rng.beta(alpha(d), beta(d)); }

double Estimator::departure_rate(std::uint32_t d) const {
  const auto& c = devices_[d].counts;
  return (1.0 + static_cast<double>(c.departures)) / (config_.prior_session_s + c.online_s);
}

Estimator::Counts Estimator::counts(std::uint32_t d) const { return devices_[d].counts; }

json Estimator::save_workloads() const {
  json out = json::array();
  for (const auto& w : workloads_)
    out.push_back({{"name", w.name}, {"prior", w.prior}, {"n", w.n}, {"sum_y", w.sum_y}, {"sum_sq_resid", w.sum_sq_resid}});
  return out;
}

Result<void> Estimator::load_workloads(const json& j) {
  if (!j.is_array()) return fail(errc::malformed, "scheduler state: workloads must be an array");
  std::vector<Workload> out;
  for (const auto& e : j) {
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string() || !e.contains("prior") ||
        !e["prior"].is_number() || !e.contains("n") || !e["n"].is_number_unsigned() || !e.contains("sum_y") ||
        !e["sum_y"].is_number() || !e.contains("sum_sq_resid") || !e["sum_sq_resid"].is_number())
      return fail(errc::malformed, "scheduler state: bad workload entry");
    out.push_back({e["name"].get<std::string>(), e["prior"].get<double>(), e["n"].get<std::uint64_t>(),
                   e["sum_y"].get<double>(), e["sum_sq_resid"].get<double>()});
  }
  workloads_ = std::move(out);
  return {};
}

json Estimator::save_device(std::uint32_t d) const {
  const auto& dev = devices_[d];
  json speed = json::array();
  for (std::size_t w = 0; w < dev.speed.size(); ++w)
    if (dev.speed[w].n > 0) speed.push_back({w, dev.speed[w].n, dev.speed[w].sum_y});
  return {{"speed", speed},         {"ok", dev.counts.ok},
          {"failed", dev.counts.failed}, {"invalid", dev.counts.invalid},
          {"departures", dev.counts.departures}, {"online_s", dev.counts.online_s}};
}

Result<void> Estimator::load_device(std::uint32_t d, const json& j) {
  auto bad = [] { return fail(errc::malformed, "scheduler state: bad device statistics"); };
  if (!j.is_object()) return bad();
  for (const char* k : {"ok", "failed", "invalid", "departures"})
    if (!j.contains(k) || !j[k].is_number_unsigned()) return bad();
  if (!j.contains("online_s") || !j["online_s"].is_number() || !j.contains("speed") || !j["speed"].is_array())
    return bad();
  auto& dev = devices_[d];
  dev.counts.ok = j["ok"].get<std::uint64_t>();
  dev.counts.failed = j["failed"].get<std::uint64_t>();
  dev.counts.invalid = j["invalid"].get<std::uint64_t>();
  dev.counts.departures = j["departures"].get<std::uint64_t>();
  dev.counts.online_s = j["online_s"].get<double>();
  dev.speed.clear();
  for (const auto& s : j["speed"]) {
    if (!s.is_array() || s.size() != 3 || !s[0].is_number_unsigned() || !s[1].is_number_unsigned() ||
        !s[2].is_number())
      return bad();
    auto w = s[0].get<std::size_t>();
    if (w >= workloads_.size()) return bad();
    if (dev.speed.size() <= w) dev.speed.resize(w + 1);
    dev.speed[w] = {s[1].get<std::uint32_t>(), s[2].get<double>()};
  }
  return {};
}

}  // namespace runsnack::pool::scheduling
