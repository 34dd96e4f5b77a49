#include "core/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>

namespace runsnack {

void init_logging() {
  auto logger = spdlog::stderr_color_mt("runsnack");
  logger->set_pattern("%^%l%$ %H:%M:%S.%e %v");
  spdlog::set_default_logger(logger);
  const char* level = std::getenv("RUNSNACK_LOG");
  spdlog::set_level(level ? spdlog::level::from_str(level) : spdlog::level::warn);
}

}  // namespace runsnack
