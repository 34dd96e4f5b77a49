#include "pool/scheduling/running_tasks.hpp"

#include <algorithm>
#include <cmath>

namespace runsnack::pool::scheduling {

using nlohmann::json;

double RunningTasks::planned_end(const Task& t) {
  double e = 0;
  for (const auto& c : t.copies) e = std::max(e, c.start + c.expected_s);
  return e;
}

double RunningTasks::first_start(const Task& t) {
  double s = t.copies.front().start;
  for (const auto& c : t.copies) s = std::min(s, c.start);
  return s;
}

void RunningTasks::list(const Entry& e) {
  // A backup candidate: part of a job, not done, with room for another copy.
  const auto& t = e.second;
  if (t.job.empty() || t.done || t.copies.empty() || static_cast<int>(t.copies.size()) >= max_copies_) return;
  auto& js = jobs_[t.job];
  js.by_end.insert({planned_end(t), &e});
  js.by_start.insert({first_start(t), &e});
}

void RunningTasks::unlist(const Entry& e) {
  const auto& t = e.second;
  if (t.job.empty() || t.copies.empty()) return;
  auto it = jobs_.find(t.job);
  if (it == jobs_.end()) return;
  it->second.by_end.erase({planned_end(t), &e});
  it->second.by_start.erase({first_start(t), &e});
  if (it->second.by_end.empty()) jobs_.erase(it);
}

bool RunningTasks::start(const std::string& task, Task info, Copy copy) {
  auto it = tasks_.find(task);
  if (it == tasks_.end()) {
    info.copies.clear();
    info.done = false;
    it = tasks_.emplace(task, std::move(info)).first;
  } else {
    for (const auto& c : it->second.copies)
      if (c.device == copy.device) return false;
    unlist(*it);
  }
  it->second.copies.push_back(copy);
  list(*it);
  return true;
}

bool RunningTasks::end(const std::string& task, std::uint32_t device, bool result) {
  auto it = tasks_.find(task);
  if (it == tasks_.end()) return false;
  auto& t = it->second;
  auto c = std::find_if(t.copies.begin(), t.copies.end(), [&](const Copy& x) { return x.device == device; });
  if (c == t.copies.end()) return false;
  unlist(*it);
  t.copies.erase(c);
  if (result) t.done = true;
  if (t.copies.empty()) tasks_.erase(it);
  else list(*it);
  return true;
}

const RunningTasks::Task* RunningTasks::find(const std::string& task) const {
  auto it = tasks_.find(task);
  return it == tasks_.end() ? nullptr : &it->second;
}

void RunningTasks::stragglers(const std::string& job, double now, double overdue_factor, std::size_t limit,
                              std::vector<Candidate>& out) const {
  out.clear();
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  auto expected_end = [&](const Task& t) {
    double planned = planned_end(t);
    return now < planned ? planned : now + overdue_factor * (now - first_start(t));
  };
  auto add = [&](const Entry* e) {
    for (const auto& c : out)
      if (c.task == &e->first) return;
    out.push_back({&e->first, &e->second, expected_end(e->second)});
  };
  // Latest planned ends, and earliest starts (the longest overdue).
  std::size_t n = 0;
  for (auto e = it->second.by_end.rbegin(); e != it->second.by_end.rend() && n < limit; ++e, ++n) add(e->second);
  n = 0;
  for (auto e = it->second.by_start.begin(); e != it->second.by_start.end() && n < limit; ++e, ++n) add(e->second);
  std::sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) {
    return a.expected_end != b.expected_end ? a.expected_end > b.expected_end : *a.task < *b.task;
  });
}

std::size_t RunningTasks::ending_after(const std::string& job, double t, std::size_t cap) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return 0;
  std::size_t n = 0;
  for (auto e = it->second.by_end.rbegin(); e != it->second.by_end.rend() && e->first > t && n < cap; ++e) ++n;
  return n;
}

std::vector<const std::string*> RunningTasks::jobs() const {
  std::vector<const std::string*> out;
  for (const auto& [id, sets] : jobs_) out.push_back(&id);
  return out;
}

void RunningTasks::clear() {
  tasks_.clear();
  jobs_.clear();
}

json RunningTasks::save() const {
  std::vector<const Entry*> sorted;
  for (const auto& e : tasks_) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(), [](const Entry* a, const Entry* b) { return a->first < b->first; });
  json out = json::array();
  for (const auto* e : sorted) {
    const auto& id = e->first;
    const auto& t = e->second;
    json copies = json::array();
    for (const auto& c : t.copies) copies.push_back({c.device, c.start, c.expected_s});
    out.push_back({{"id", id}, {"job", t.job}, {"workload", t.workload}, {"work", t.work},
                   {"preference", to_string(t.preference)}, {"done", t.done}, {"copies", copies}});
  }
  return out;
}

Result<void> RunningTasks::load(const json& j, std::size_t devices, std::size_t workloads) {
  auto bad = [] { return fail(errc::malformed, "scheduler state: bad running task"); };
  if (!j.is_array()) return bad();
  clear();
  for (const auto& e : j) {
    if (!e.is_object() || !e.contains("id") || !e["id"].is_string() || !e.contains("job") || !e["job"].is_string() ||
        !e.contains("workload") || !e["workload"].is_number_unsigned() || !e.contains("work") ||
        !e["work"].is_number() || !e.contains("preference") || !e["preference"].is_string() ||
        !e.contains("done") || !e["done"].is_boolean() || !e.contains("copies") || !e["copies"].is_array() ||
        e["copies"].empty())
      return bad();
    auto pref = parse_preference(e["preference"].get<std::string>());
    if (!pref) return bad();
    Task t;
    t.job = e["job"].get<std::string>();
    t.workload = e["workload"].get<std::uint32_t>();
    if (t.workload >= workloads) return bad();
    t.work = e["work"].get<double>();
    t.preference = *pref;
    t.done = e["done"].get<bool>();
    for (const auto& c : e["copies"]) {
      if (!c.is_array() || c.size() != 3 || !c[0].is_number_unsigned() || !c[1].is_number() || !c[2].is_number())
        return bad();
      auto device = c[0].get<std::uint32_t>();
      if (device >= devices) return bad();
      t.copies.push_back({device, c[1].get<double>(), c[2].get<double>()});
    }
    auto [it, inserted] = tasks_.emplace(e["id"].get<std::string>(), std::move(t));
    if (!inserted) return bad();
    list(*it);
  }
  return {};
}

}  // namespace runsnack::pool::scheduling
