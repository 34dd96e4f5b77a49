#include "fs/offload.hpp"

namespace runsnack::fs {

OffloadPool::~OffloadPool() {
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void OffloadPool::post(const std::string& owner, std::unique_ptr<OffloadJob> job) {
  std::lock_guard lock(mutex_);
  queue_.push(owner, std::move(job));
  if (!queue_.ready()) return;  // its owner is at its limit: it starts when one of theirs ends
  if (idle_ > 0) wake_.notify_one();
  else if (threads_.size() < max_threads_) threads_.emplace_back([this] { work(); });
}

std::size_t OffloadPool::threads() const {
  std::lock_guard lock(mutex_);
  return threads_.size();
}

void OffloadPool::work() {
  std::unique_lock lock(mutex_);
  for (;;) {
    auto next = queue_.next();
    if (!next) {
      if (closing_ && queue_.waiting() == 0) {
        wake_.notify_all();  // the others, asleep while jobs waited for their owner's turn
        return;
      }
      ++idle_;
      wake_.wait(lock);
      --idle_;
      continue;
    }
    if (queue_.ready() && idle_ > 0) wake_.notify_one();
    lock.unlock();
    next->job->run();
    next->job.reset();
    lock.lock();
    queue_.done(next->owner);
  }
}

OffloadPool& offload_workers() {
  // Joined at exit; a provider's io thread only returns once the jobs it waits for are done.
  static OffloadPool pool(kOffloadThreads, kOffloadThreadsPerOwner);
  return pool;
}

boost::asio::thread_pool& offload_pool() {
  static boost::asio::thread_pool pool(1);
  return pool;
}

}  // namespace runsnack::fs
