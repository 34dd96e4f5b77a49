#pragma once
// Logging through spdlog to stderr. Level from $RUNSNACK_LOG
// (trace|debug|info|warn|error|off, default warn) so that command output on
// stdout stays clean for scripts.

#include <spdlog/spdlog.h>

namespace runsnack {

void init_logging();

}  // namespace runsnack
