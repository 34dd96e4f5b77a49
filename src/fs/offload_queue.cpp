#include "fs/offload_queue.hpp"

namespace runsnack::fs {

void OffloadQueue::maybe_queue_turn(const std::string& owner, Lane& lane) {
  if (lane.in_turn || !may_start(owner, lane)) return;
  lane.in_turn = true;
  turns_.push_back(owner);
}

void OffloadQueue::push(const std::string& owner, std::unique_ptr<OffloadJob> job) {
  Lane& lane = lanes_[owner];
  lane.jobs.push_back(std::move(job));
  ++waiting_;
  maybe_queue_turn(owner, lane);
}

std::optional<OffloadQueue::Next> OffloadQueue::next() {
  if (turns_.empty()) return std::nullopt;
  Next out{std::move(turns_.front()), nullptr};
  turns_.pop_front();
  Lane& lane = lanes_.at(out.owner);
  lane.in_turn = false;
  out.job = std::move(lane.jobs.front());
  lane.jobs.pop_front();
  ++lane.running;
  --waiting_;
  ++running_;
  maybe_queue_turn(out.owner, lane);  // its next job waits for the others' turns
  return out;
}

void OffloadQueue::done(const std::string& owner) {
  auto it = lanes_.find(owner);
  if (it == lanes_.end() || it->second.running == 0) return;
  Lane& lane = it->second;
  --lane.running;
  --running_;
  if (lane.jobs.empty() && lane.running == 0) {
    lanes_.erase(it);
    return;
  }
  maybe_queue_turn(owner, lane);
}

std::size_t OffloadQueue::running(const std::string& owner) const {
  auto it = lanes_.find(owner);
  return it == lanes_.end() ? 0 : it->second.running;
}

}  // namespace runsnack::fs
