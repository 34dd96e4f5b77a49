#include "gpu/process_memory.hpp"

#include "gpu/nvml.hpp"

namespace runsnack {

std::optional<std::map<pid_t, std::optional<std::uint64_t>>> gpu_memory_by_process() {
  auto nvml = Nvml::open();
  if (!nvml) return std::nullopt;
  auto count = (*nvml)->device_count();
  if (!count || *count == 0) return std::nullopt;
  std::map<pid_t, std::optional<std::uint64_t>> out;
  bool told = false;  // at least one device answered
  for (unsigned i = 0; i < *count; ++i) {
    auto device = (*nvml)->device(i);
    if (!device) continue;
    auto processes = (*nvml)->compute_processes(*device);
    if (!processes) continue;
    told = true;
    for (const auto& p : *processes) {
      auto it = out.try_emplace(static_cast<pid_t>(p.pid), std::uint64_t{0}).first;
      if (!p.used_bytes || !it->second) it->second.reset();
      else *it->second += *p.used_bytes;
    }
  }
  if (!told) return std::nullopt;
  return out;
}

}  // namespace runsnack
