#include "cli/gpu_arg.hpp"

#include <stdexcept>

namespace runsnack::cli {

Result<std::vector<int>> parse_gpu_list(const std::string& text) {
  std::vector<int> out;
  if (text.empty() || text == "all") return out;
  std::size_t start = 0;
  while (start <= text.size()) {
    auto end = text.find(',', start);
    std::string item = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    try {
      std::size_t used = 0;
      int v = std::stoi(item, &used);
      if (used != item.size() || v < 0 || v > 63) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      return fail(errc::invalid_argument, "bad --gpu list '" + text + "': expected e.g. 0 or 0,1 or all");
    }
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

}  // namespace runsnack::cli
