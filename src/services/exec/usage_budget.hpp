#pragma once
// A grant's usage budget for run/shell (`share --cpu-hours H --gpu-hours H`,
// grant.terms["run"]["cpu_hours"/"gpu_hours"]). CPU time is what the
// command's processes used (rusage when it ends; /proc while it runs); GPU
// time is wall time x GPUs assigned. The totals live in the store's `usage`
// table (schema migration 2). When a budget is spent the grant's expiry is
// set to now, so the provider ends its sessions and admits no new ones.
//
// Each call opens the provider's database briefly; failures to read count as
// nothing spent, failures to write are logged. Not thread-safe.

#include "link/grant.hpp"
#include "sandbox/run_terms.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <sys/types.h>

#include <functional>
#include <memory>

#include <chrono>
#include <optional>
#include <string>

namespace runsnack::exec {

inline constexpr const char* kBudgetSpent = "usage budget spent";

class UsageBudget {
 public:
  UsageBudget(const Grant& grant, const RunTerms& terms, std::size_t gpus);

  bool limited() const { return cpu_budget_s_ || gpu_budget_s_; }
  // kBudgetSpent plus which one, when the stored totals plus a running command's share reach a budget.
  std::optional<std::string> spent(double running_cpu_s, double running_wall_s) const;
  // spent(), remembering the running command's CPU time: a command killed
  // with its children does not get their time back in rusage.
  std::optional<std::string> observe(double running_cpu_s, double running_wall_s);
  // Adds one finished command's usage (at least what observe() saw) to the
  // store; expires the grant when a budget is spent.
  void record(double cpu_s, double wall_s);

 private:
  std::string grant_id_;
  std::optional<double> cpu_budget_s_, gpu_budget_s_;
  std::size_t gpus_;
  double used_cpu_s_ = 0, used_gpu_s_ = 0;
  double observed_cpu_s_ = 0;
};

// While a command runs (until *finished): every kBudgetPoll, measures the
// tree under `root` and calls stop(reason) once when the budget is spent.
inline constexpr std::chrono::milliseconds kBudgetPoll{200};  // CPU overshoot is at most about this
boost::asio::awaitable<void> enforce_budget(std::shared_ptr<UsageBudget> budget, pid_t root,
                                            std::shared_ptr<bool> finished,
                                            std::function<void(const std::string&)> stop);

// What run and shell do at start: when `budget` is limited, starts
// enforce_budget on `ex` for the tree under `root`. Returns the flag to set
// once the command has ended (it also stops the watcher).
std::shared_ptr<bool> watch_budget(const boost::asio::any_io_executor& ex, std::shared_ptr<UsageBudget> budget,
                                   pid_t root, std::function<void(const std::string&)> stop);

// CPU seconds (user+system, including reaped children) of `root` and all its live descendants.
double tree_cpu_seconds(pid_t root);

}  // namespace runsnack::exec
