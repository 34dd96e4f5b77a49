#include "pool/scheduling/capacity_grid.hpp"

#include <algorithm>
#include <cmath>

namespace runsnack::pool::scheduling {
namespace {

// Fixed-point scales for the cell sums.
constexpr double kLog2Scale = 0x1p40;    // 10^4 devices x 2^6 x 2^40 fits in 63 bits
constexpr double kPriceScale = 1e6;      // micro-credits per hour
constexpr double kSuccessScale = 1 << 30;
constexpr double kRateScale = 1e12;      // departures per 10^12 s
constexpr int kSpeedSteps = 4;           // cells per octave of speed
constexpr int kPriceSteps = 2;           // cells per octave of price
constexpr std::int32_t kFreeKey = -10000;  // price 0
constexpr double kPriceFloor = 0.001;    // keeps free devices comparable by time

std::int64_t fixed(double v, double scale) { return static_cast<std::int64_t>(std::llround(v * scale)); }

// Whole tasks that fit in `span` seconds; the fixed-point averages are off
// in the last bits, which must not turn 3 s / 1 s into 2.
double whole_tasks(double span, double task_s) { return std::floor(span / task_s + 1e-9); }

}  // namespace

double preference_score(Preference p, double task_s, double price_per_hour, double reliability) {
  double r = std::max(reliability, 1e-6);
  double price = std::max(price_per_hour, 0.0) + kPriceFloor;
  switch (p) {
    case Preference::fast: return task_s / r;
    case Preference::cheap: return price * task_s / r;
    case Preference::balanced: return task_s * std::sqrt(price) / r;
  }
  return task_s / r;
}

void CapacityGrid::update_means(Cell& c) {
  if (c.members == 0) return;
  double n = c.members;
  c.speed = std::exp2(static_cast<double>(c.sum_log2_speed) / (kLog2Scale * n));
  c.price = static_cast<double>(c.sum_price) / (kPriceScale * n);
  c.success = static_cast<double>(c.sum_success) / (kSuccessScale * n);
  c.rate = static_cast<double>(c.sum_rate) / (kRateScale * n);
  c.verification = static_cast<double>(c.sum_verification) / (kSuccessScale * n);
}

CapacityGrid::CellView CapacityGrid::view(const Cell& c, double unit_s, double replica_s) const {
  double task_s = unit_s / c.speed + c.verification * replica_s;
  return {task_s, c.price, c.success * std::exp(-c.rate * task_s)};
}

std::uint32_t CapacityGrid::cell_for(std::int32_t speed_key, std::int32_t price_key) {
  std::int64_t key = (static_cast<std::int64_t>(speed_key) << 32) | static_cast<std::uint32_t>(price_key);
  auto [it, inserted] = by_key_.try_emplace(key, static_cast<std::uint32_t>(cells_.size()));
  if (inserted) {
    Cell c;
    c.speed_key = speed_key;
    c.price_key = price_key;
    cells_.push_back(std::move(c));
  }
  return it->second;
}

void CapacityGrid::attach(std::uint32_t device) {
  auto& s = slots_[device];
  auto& c = cells_[s.cell];
  if (c.members == 0) {
    // Keep live_ ordered: faster cells first, then cheaper.
    auto pos = std::lower_bound(live_.begin(), live_.end(), s.cell, [this](std::uint32_t a, std::uint32_t b) {
      const auto &x = cells_[a], &y = cells_[b];
      return x.speed_key != y.speed_key ? x.speed_key > y.speed_key : x.price_key < y.price_key;
    });
    live_.insert(pos, s.cell);
  }
  c.members += 1;
  members_ += 1;
  c.sum_log2_speed += s.log2_speed;
  c.sum_price += s.price;
  c.sum_success += s.success;
  c.sum_rate += s.rate;
  c.sum_verification += s.verification;
  update_means(c);
  total_speed_ = -1;
  if (s.busy) {
    std::pair<double, std::uint32_t> e{s.free_at, device};
    c.busy.insert(std::lower_bound(c.busy.begin(), c.busy.end(), e), e);
  } else {
    c.idle += 1;
  }
}

void CapacityGrid::detach(std::uint32_t device) {
  auto& s = slots_[device];
  auto& c = cells_[s.cell];
  c.members -= 1;
  members_ -= 1;
  c.sum_log2_speed -= s.log2_speed;
  c.sum_price -= s.price;
  c.sum_success -= s.success;
  c.sum_rate -= s.rate;
  c.sum_verification -= s.verification;
  update_means(c);
  total_speed_ = -1;
  if (s.busy) {
    std::pair<double, std::uint32_t> e{s.free_at, device};
    auto it = std::lower_bound(c.busy.begin(), c.busy.end(), e);
    if (it != c.busy.end() && *it == e) c.busy.erase(it);
  } else {
    c.idle -= 1;
  }
  if (c.members == 0) live_.erase(std::find(live_.begin(), live_.end(), s.cell));
}

void CapacityGrid::set(std::uint32_t device, const Member& m) {
  if (device >= slots_.size()) slots_.resize(device + 1);
  auto& s = slots_[device];
  double speed = std::max(m.relative_speed, 1e-300);
  auto speed_key = static_cast<std::int32_t>(std::floor(std::log2(speed) * kSpeedSteps));
  auto price_key = m.price_per_hour > 0 ? static_cast<std::int32_t>(std::floor(std::log2(m.price_per_hour) * kPriceSteps))
                                        : kFreeKey;
  if (s.cell != kNone) detach(device);
  s.log2_speed = fixed(std::log2(speed), kLog2Scale);
  s.price = fixed(std::max(m.price_per_hour, 0.0), kPriceScale);
  s.success = fixed(std::clamp(m.success, 0.0, 1.0), kSuccessScale);
  s.rate = fixed(std::max(m.departure_rate, 0.0), kRateScale);
  s.verification = fixed(std::clamp(m.verification, 0.0, 1.0), kSuccessScale);
  s.cell = cell_for(speed_key, price_key);
  attach(device);
}

void CapacityGrid::erase(std::uint32_t device) {
  if (!contains(device)) return;
  detach(device);
  slots_[device] = Slot{};
}

bool CapacityGrid::contains(std::uint32_t device) const {
  return device < slots_.size() && slots_[device].cell != kNone;
}

void CapacityGrid::set_busy(std::uint32_t device, double free_at) {
  if (!contains(device)) return;
  auto& s = slots_[device];
  auto& c = cells_[s.cell];
  if (s.busy) {
    std::pair<double, std::uint32_t> old{s.free_at, device};
    auto it = std::lower_bound(c.busy.begin(), c.busy.end(), old);
    if (it != c.busy.end() && *it == old) c.busy.erase(it);
  } else {
    c.idle -= 1;
  }
  s.busy = true;
  s.free_at = free_at;
  std::pair<double, std::uint32_t> e{free_at, device};
  c.busy.insert(std::lower_bound(c.busy.begin(), c.busy.end(), e), e);
}

void CapacityGrid::set_idle(std::uint32_t device) {
  if (!contains(device) || !slots_[device].busy) return;
  auto& s = slots_[device];
  auto& c = cells_[s.cell];
  std::pair<double, std::uint32_t> old{s.free_at, device};
  auto it = std::lower_bound(c.busy.begin(), c.busy.end(), old);
  if (it != c.busy.end() && *it == old) c.busy.erase(it);
  s.busy = false;
  c.idle += 1;
}

bool CapacityGrid::covers(const Query& q) const {
  // An upper bound first (every busy device counted as if free now). When
  // even that falls short the asking device is needed and the busy lists
  // need not be walked: the common case while a job is young.
  double upper = 0;
  for (auto ci : live_) {
    const auto& c = cells_[ci];
    if (q.unit_s / std::exp2(static_cast<double>(c.speed_key + 1) / kSpeedSteps) > q.horizon_s) break;
    auto v = view(c, q.unit_s, q.replica_s);
    if (!(preference_score(q.preference, v.task_s, v.price, v.reliability) < q.threshold)) continue;
    upper += c.members * whole_tasks(q.horizon_s, v.task_s) * v.reliability;
  }
  return upper >= q.target && capacity(q) >= q.target;
}

double CapacityGrid::capacity(const Query& q) const {
  double total = 0;
  for (auto ci : live_) {
    const auto& c = cells_[ci];
    // Cells are ordered fastest first: once a cell's fastest possible device
    // cannot finish one task within the horizon, no later one can either.
    if (q.unit_s / std::exp2(static_cast<double>(c.speed_key + 1) / kSpeedSteps) > q.horizon_s) break;
    auto v = view(c, q.unit_s, q.replica_s);
    if (!(preference_score(q.preference, v.task_s, v.price, v.reliability) < q.threshold)) continue;
    std::uint32_t idle = c.idle;
    if (q.exclude < slots_.size() && slots_[q.exclude].cell == ci && !slots_[q.exclude].busy) idle -= 1;
    total += idle * whole_tasks(q.horizon_s, v.task_s) * v.reliability;
    if (total >= q.target) return total;
    for (const auto& [free_at, device] : c.busy) {
      double wait = std::max(0.0, free_at - q.now);
      if (whole_tasks(q.horizon_s - wait, v.task_s) < 1) break;
      if (device == q.exclude) continue;
      total += whole_tasks(q.horizon_s - wait, v.task_s) * v.reliability;
      if (total >= q.target) return total;
    }
  }
  return total;
}

double CapacityGrid::total_speed() const {
  if (total_speed_ >= 0) return total_speed_;
  double sum = 0;
  for (auto ci : live_) {
    const auto& c = cells_[ci];
    sum += c.members * c.speed;
  }
  total_speed_ = sum;
  return sum;
}

std::vector<FrontPoint> CapacityGrid::pareto_front(double unit_s, double replica_s) const {
  std::vector<FrontPoint> all;
  for (auto ci : live_) {
    const auto& c = cells_[ci];
    auto v = view(c, unit_s, replica_s);
    all.push_back({v.task_s, v.price * v.task_s / 3600.0, v.reliability, v.price, c.members});
  }
  auto dominates = [](const FrontPoint& a, const FrontPoint& b) {
    bool no_worse = a.task_s <= b.task_s && a.cost_per_task <= b.cost_per_task && a.reliability >= b.reliability;
    bool better = a.task_s < b.task_s || a.cost_per_task < b.cost_per_task || a.reliability > b.reliability;
    return no_worse && better;
  };
  std::vector<FrontPoint> front;
  for (const auto& p : all)
    if (std::none_of(all.begin(), all.end(), [&](const FrontPoint& o) { return dominates(o, p); }))
      front.push_back(p);
  std::sort(front.begin(), front.end(), [](const FrontPoint& a, const FrontPoint& b) { return a.task_s < b.task_s; });
  return front;
}

}  // namespace runsnack::pool::scheduling
