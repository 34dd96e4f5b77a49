#pragma once
// --gpu LIST, as `share` and `pool join` take it: "0", "0,1" or "all".

#include "core/error.hpp"

#include <string>
#include <vector>

namespace runsnack::cli {

// NVML indices; empty for "all" (or nothing given).
Result<std::vector<int>> parse_gpu_list(const std::string& text);

}  // namespace runsnack::cli
