#include "services/exec/usage_budget.hpp"

#include "core/json_fields.hpp"
#include "core/paths.hpp"
#include "services/exec/process_usage.hpp"
#include "store/database.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>


#include <algorithm>
#include <chrono>
#include <cstdio>

namespace runsnack::exec {

namespace {

Result<Database> open_store() {
  auto dir = state_dir();
  if (!dir) return dir.error();
  return Database::open(*dir / "runsnack.db");
}

std::optional<double> hours_to_seconds(const nlohmann::json& terms, const char* key) {
  if (!terms.is_object() || !terms.contains(key) || !terms[key].is_number() || !(terms[key].get<double>() >= 0))
    return std::nullopt;
  return terms[key].get<double>() * 3600.0;
}

}  // namespace

UsageBudget::UsageBudget(const Grant& grant, const RunTerms&, std::size_t gpus) : grant_id_(grant.id), gpus_(gpus) {
  const nlohmann::json run = field_or(grant.terms, "run");
  cpu_budget_s_ = hours_to_seconds(run, "cpu_hours");
  gpu_budget_s_ = hours_to_seconds(run, "gpu_hours");
  if (!limited()) return;
  auto db = open_store();
  if (!db) return;
  auto q = db->prepare("SELECT cpu_us, gpu_us FROM usage WHERE grant_id = ?1");
  if (!q) return;
  q->bind(1, std::string_view(grant_id_));
  if (auto row = q->step(); row && *row) {
    used_cpu_s_ = static_cast<double>(q->column_int64(0)) / 1e6;
    used_gpu_s_ = static_cast<double>(q->column_int64(1)) / 1e6;
  }
}

std::optional<std::string> UsageBudget::spent(double running_cpu_s, double running_wall_s) const {
  char buf[160];
  if (cpu_budget_s_ && used_cpu_s_ + running_cpu_s >= *cpu_budget_s_) {
    std::snprintf(buf, sizeof buf, "%s: %.4f of %.4f CPU hours used", kBudgetSpent,
                  (used_cpu_s_ + running_cpu_s) / 3600, *cpu_budget_s_ / 3600);
    return std::string(buf);
  }
  const double gpu_s = used_gpu_s_ + running_wall_s * static_cast<double>(gpus_);
  if (gpu_budget_s_ && (gpus_ > 0 || used_gpu_s_ > 0) && gpu_s >= *gpu_budget_s_) {
    std::snprintf(buf, sizeof buf, "%s: %.4f of %.4f GPU hours used", kBudgetSpent, gpu_s / 3600,
                  *gpu_budget_s_ / 3600);
    return std::string(buf);
  }
  return std::nullopt;
}

std::optional<std::string> UsageBudget::observe(double running_cpu_s, double running_wall_s) {
  observed_cpu_s_ = std::max(observed_cpu_s_, running_cpu_s);
  return spent(running_cpu_s, running_wall_s);
}

void UsageBudget::record(double cpu_s, double wall_s) {
  if (!limited()) return;
  cpu_s = std::max(cpu_s, observed_cpu_s_);
  observed_cpu_s_ = 0;
  const double gpu_s = wall_s * static_cast<double>(gpus_);
  auto db = open_store();
  if (!db) {
    spdlog::warn("usage budget: cannot open the store: {}", db.error().what());
    return;
  }
  auto up = db->prepare(
      "INSERT INTO usage (grant_id, cpu_us, gpu_us) VALUES (?1, ?2, ?3) "
      "ON CONFLICT (grant_id) DO UPDATE SET cpu_us = cpu_us + ?2, gpu_us = gpu_us + ?3");
  if (!up) return;
  up->bind(1, std::string_view(grant_id_)).bind(2, static_cast<std::int64_t>(cpu_s * 1e6)).bind(3, static_cast<std::int64_t>(gpu_s * 1e6));
  if (auto r = up->run(); !r) spdlog::warn("usage budget: cannot record usage: {}", r.error().what());
  used_cpu_s_ += cpu_s;
  used_gpu_s_ += gpu_s;
  if (!spent(0, 0)) return;
  // Spent: the link expires now (the provider's watch ends its sessions, admission refuses new ones).
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count();
  auto ex = db->prepare("UPDATE grants SET expires = ?2 WHERE id = ?1 AND (expires IS NULL OR expires > ?2)");
  if (!ex) return;
  ex->bind(1, std::string_view(grant_id_)).bind(2, static_cast<std::int64_t>(now));
  if (auto r = ex->run(); !r) spdlog::warn("usage budget: cannot expire the link: {}", r.error().what());
}

boost::asio::awaitable<void> enforce_budget(std::shared_ptr<UsageBudget> budget, pid_t root,
                                            std::shared_ptr<bool> finished,
                                            std::function<void(const std::string&)> stop) {
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor);
  const auto start = std::chrono::steady_clock::now();
  while (!*finished) {
    timer.expires_after(kBudgetPoll);
    (void)co_await timer.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
    if (*finished) co_return;
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (auto why = budget->observe(tree_cpu_seconds(root), wall)) {
      stop(*why);
      co_return;
    }
  }
}

double tree_cpu_seconds(pid_t root) {
  double total = 0;
  for (const auto& p : process_tree(read_processes(), root)) total += p.cpu_seconds;
  return total;
}

std::shared_ptr<bool> watch_budget(const boost::asio::any_io_executor& ex, std::shared_ptr<UsageBudget> budget,
                                   pid_t root, std::function<void(const std::string&)> stop) {
  auto finished = std::make_shared<bool>(false);
  // Owned by `finished`: the watcher ends at its next poll once the command has ended.
  if (budget->limited())
    boost::asio::co_spawn(ex, enforce_budget(std::move(budget), root, finished, std::move(stop)),
                          boost::asio::detached);
  return finished;
}

}  // namespace runsnack::exec
