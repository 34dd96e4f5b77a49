#pragma once
// The completion handler for co_spawn where nobody waits for a result: logs
// whatever escaped the coroutine, which is a bug of ours, never a peer's doing
// (peer faults come back as values). `what` names the coroutine in the log.

#include <spdlog/spdlog.h>

#include <exception>

namespace runsnack {

inline auto log_exceptions(const char* what) {
  return [what](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      spdlog::error("{}: {}", what, ex.what());
    }
  };
}

}  // namespace runsnack
