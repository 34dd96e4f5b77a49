#include "pool/stall_watch.hpp"

namespace runsnack::pool {

std::vector<std::string> StallWatch::step(const std::vector<JobView>& jobs, std::int64_t now_ms) {
  std::map<std::string, std::int64_t> still;
  std::vector<std::string> give_up;
  for (const auto& v : jobs) {
    if (!stuck(v)) continue;
    auto it = stuck_since_.find(v.job);
    const std::int64_t since = it == stuck_since_.end() ? now_ms : it->second;
    if (now_ms - since >= give_up_after_.count()) give_up.push_back(v.job);
    else still.emplace(v.job, since);
  }
  stuck_since_ = std::move(still);  // a job that moved again starts over
  return give_up;
}

}  // namespace runsnack::pool
