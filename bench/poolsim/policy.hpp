#pragma once
// The seam between poolsim and a scheduling policy: the same events and the
// same claim question the coordinator puts to pool/scheduling's Scheduler.
// OurScheduler forwards to the real Scheduler; the baselines live in
// baselines.hpp.

#include "pool/scheduling/scheduler.hpp"

#include <memory>
#include <span>
#include <string>
#include <vector>

namespace poolsim {

namespace sch = runsnack::pool::scheduling;

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string name() const = 0;
  virtual void device_joined(const sch::DeviceProfile& d, double now) = 0;
  virtual void device_left(const std::string& device, double now) = 0;
  virtual void task_started(const sch::TaskStart& s, double now) = 0;
  virtual void task_finished(const sch::TaskEnd& e, double now) = 0;
  virtual void verdict(const std::string& /*device*/, bool /*valid*/) {}
  // The trust policy's current replica probability for the device.
  virtual void verification(const std::string& /*device*/, double /*probability*/) {}
  virtual sch::Decision decide(const std::string& device, std::span<const sch::PendingJob> jobs, double now) = 0;
};

class OurScheduler final : public Policy {
 public:
  // `checked`: the workloads the simulated coordinator checks by computation (no replica wait).
  OurScheduler(std::uint64_t seed, std::vector<std::string> checked) : s_(config(std::move(checked)), seed) {}
  std::string name() const override { return "ours"; }
  void device_joined(const sch::DeviceProfile& d, double now) override { s_.device_joined(d, now); }
  void device_left(const std::string& d, double now) override { s_.device_left(d, now); }
  void task_started(const sch::TaskStart& t, double now) override { s_.task_started(t, now); }
  void task_finished(const sch::TaskEnd& e, double now) override { s_.task_finished(e, now); }
  void verdict(const std::string& d, bool valid) override { s_.verdict(d, valid); }
  void verification(const std::string& d, double p) override { s_.set_verification(d, p); }
  static sch::SchedulerConfig config(std::vector<std::string> checked) {
    sch::SchedulerConfig c;
    c.checked_by_computation = std::move(checked);
    return c;
  }
  sch::Decision decide(const std::string& d, std::span<const sch::PendingJob> jobs, double now) override {
    return s_.decide(d, jobs, now);
  }

 private:
  sch::Scheduler s_;
};

}  // namespace poolsim
