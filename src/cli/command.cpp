#include "cli/command.hpp"

#include <cstdio>
#include <exception>
#include <iostream>

namespace runsnack::cli {

int report(const std::string& message) {
  std::cerr << "runsnack: " << message << std::endl;
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
  std::cout << j.dump() << std::endl;
}

}  // namespace runsnack::cli
