#pragma once
// GPU memory per process, from NVML (nvml.hpp): what `runsnack sessions`
// shows for each running command. Unknown (nullopt) where NVML cannot be
// used: no driver, no GPU, or a driver that does not tell.

#include <cstdint>
#include <map>
#include <optional>

#include <sys/types.h>

namespace runsnack {

// pid -> bytes of GPU memory, summed over the devices (nullopt where NVML does not tell); processes
// without a CUDA context are absent.
std::optional<std::map<pid_t, std::optional<std::uint64_t>>> gpu_memory_by_process();

}  // namespace runsnack
