#include "cli/command.hpp"

#include "core/printable.hpp"

#include <cstdio>
#include <exception>
#include <iostream>

namespace runsnack::cli {

int report(const std::string& message) {
  // Errors often carry the other side's words (a refusal's reason): escaped.
  std::cerr << "runsnack: " << printable_lines(message) << std::endl;
  return kExitFailure;
}

int report(const Error& e) { return report(e.what()); }

void run_command(ExitStatus& status, const std::function<int()>& body) {
  try {
    status.code = body();
  } catch (const std::exception& e) {
    status.code = report(std::string("internal error: ") + e.what());
  }
}

void print_json(const nlohmann::json& j) {
  // A peer's bytes that are not UTF-8 become U+FFFD rather than an exception.
  std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
}

}  // namespace runsnack::cli
