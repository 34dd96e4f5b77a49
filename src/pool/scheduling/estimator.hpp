#pragma once
// What the scheduler has learned about each device: its speed per workload,
// its success rate and how long it stays online. Pure bookkeeping, no
// decisions (pool/scheduling/scheduler.hpp decides).
//
// Speed. For a task of `work` that took `elapsed` seconds on a device with
// calibration score s, y = log(work / elapsed) - log(s). Per workload w the
// pool-wide mean of y is a_w (the workload's unit: work per second per unit
// of score). A device's own offset z_dw = y - a_w has a normal prior
// N(m_d, prior_speed_sd^2), m_d being the device's shrunk mean offset on its
// other workloads (a throttled card is slow at everything), and each
// observation has noise observation_sd (task sizes vary), so the posterior is
// the usual normal-normal update. Expected speed = s * exp(a_w + mean z);
// Thompson sampling draws z from the posterior, which is what makes a new
// or uncertain device get tried.
//
// Each observation's residual against the device's estimate before it, squared
// and summed per workload, gives spread(w): how unpredictable single tasks are.
//
// Reliability. Success rate ~ Beta(prior_success * prior_strength + ok,
// (1 - prior_success) * prior_strength + failed + invalid). Departures are a
// Poisson process per online second with a Gamma(1, prior_session_s) prior:
// rate = (1 + departures) / (prior_session_s + online seconds), and a task of
// t seconds survives with exp(-rate * t).
//
// Devices and workloads are dense indices assigned by the caller in order.
// Not thread-safe.

#include "core/error.hpp"
#include "pool/scheduling/rng.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace runsnack::pool::scheduling {

struct EstimatorConfig {
  double prior_speed_sd = 0.5;     // log: how far real speed may sit from calibration (x1.65 at 1 sd)
  double observation_sd = 0.4;     // log: one task's spread around the device's speed
  double device_prior_weight = 2;  // pseudo-observations shrinking m_d towards 0
  double default_task_s = 60;      // a typical task on a median device before anything is observed
  double prior_success = 0.95;
  double prior_strength = 20;      // pseudo-attempts behind prior_success
  double prior_session_s = 3600;   // mean time online before a departure, before any is observed
};

class Estimator {
 public:
  explicit Estimator(EstimatorConfig config = {}) : config_(config) {}
  const EstimatorConfig& config() const { return config_; }

  // Workloads. `typical_work` and `mean_log_score` (of the devices online)
  // set the prior for a_w the first time a workload is seen.
  std::uint32_t add_workload(std::string_view name, double typical_work, double mean_log_score);
  std::optional<std::uint32_t> find_workload(std::string_view name) const;
  std::size_t workloads() const { return workloads_.size(); }
  const std::string& workload_name(std::uint32_t w) const { return workloads_[w].name; }
  double log_unit(std::uint32_t w) const;  // a_w
  std::uint64_t workload_observations(std::uint32_t w) const { return workloads_[w].n; }  // pool-wide
  // How much one task's log time strays from its device's expectation in this
  // workload (task sizes the job cannot predict, heavy tails): a sd learned from
  // the residuals, observation_sd until there are some.
  double spread(std::uint32_t w) const;

  // Devices: `d` must be devices() (the next index) when added.
  void add_device(std::uint32_t d, double score);
  void set_score(std::uint32_t d, double score);
  std::size_t devices() const { return devices_.size(); }

  void observe_speed(std::uint32_t d, std::uint32_t w, double work, double elapsed_s);
  void observe_success(std::uint32_t d);
  void observe_failure(std::uint32_t d);
  // A wrong result; `retract_success` when it had been counted as a success.
  void observe_invalid(std::uint32_t d, bool retract_success);
  void observe_session(std::uint32_t d, double online_s, bool departed);

  // log(speed / score) - a_w: the device's offset, posterior mean and sd.
  double offset_mean(std::uint32_t d, std::uint32_t w) const;
  double offset_sd(std::uint32_t d, std::uint32_t w) const;
  std::uint32_t observations(std::uint32_t d, std::uint32_t w) const;
  // score * exp(offset): speed up to the workload's unit, comparable across devices.
  double relative_speed(std::uint32_t d, std::uint32_t w) const;
  // Expected seconds for `work` on `d`; with a drawn offset (Thompson), a draw of them.
  double task_seconds(std::uint32_t d, std::uint32_t w, double work) const;
  double sample_offset(std::uint32_t d, std::uint32_t w, Rng& rng) const;
  double task_seconds_at(std::uint32_t d, std::uint32_t w, double work, double offset) const;

  double success_mean(std::uint32_t d) const;
  double sample_success(std::uint32_t d, Rng& rng) const;
  double departure_rate(std::uint32_t d) const;  // per online second
  struct Counts {
    std::uint64_t ok = 0, failed = 0, invalid = 0, departures = 0;
    double online_s = 0;
  };
  Counts counts(std::uint32_t d) const;

  nlohmann::json save_workloads() const;
  Result<void> load_workloads(const nlohmann::json& j);
  nlohmann::json save_device(std::uint32_t d) const;
  Result<void> load_device(std::uint32_t d, const nlohmann::json& j);  // after add_device(d, ...)

 private:
  struct Workload {
    std::string name;
    double prior = 0;   // a_w before observations
    std::uint64_t n = 0;
    double sum_y = 0;
    double sum_sq_resid = 0;  // squared residuals against the device's estimate at the time
  };
  struct SpeedStats {
    std::uint32_t n = 0;
    double sum_y = 0;
  };
  struct Device {
    double log_score = 0;
    std::vector<SpeedStats> speed;  // by workload; may be shorter than workloads_
    Counts counts;
  };
  const SpeedStats* stats(std::uint32_t d, std::uint32_t w) const;
  double device_prior_mean(std::uint32_t d, std::uint32_t except) const;
  double alpha(std::uint32_t d) const;
  double beta(std::uint32_t d) const;

  EstimatorConfig config_;
  std::vector<Workload> workloads_;
  std::vector<Device> devices_;
};

}  // namespace runsnack::pool::scheduling
