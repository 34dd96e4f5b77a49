// Makes fd 1 a pipe and collects what is written to it (the driver prints
// device printf output on stdout at synchronisation points). A thread keeps
// the pipe drained so a writer never blocks; take() empties it on demand, so
// output printed before a reply is sent ahead of that reply.
#pragma once

#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace runsnack::cuda {

class StdoutCapture {
 public:
  StdoutCapture();
  ~StdoutCapture();
  std::vector<std::uint8_t> take();

 private:
  // Reads what is there; false at EOF.
  bool drain_locked();
  void run();
  std::mutex mutex_;
  std::vector<std::uint8_t> pending_;
  int read_ = -1;
  int saved_ = -1;
  std::thread thread_;
};

}  // namespace runsnack::cuda
