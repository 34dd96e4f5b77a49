#pragma once
// What a provider's GPUs look like right now, for the info service and
// `runsnack share` (docs/ARCHITECTURE.md section 6), read through NVML.
//
// query_gpus() never fails and never throws: a machine with no NVIDIA driver,
// an NVML that will not initialise, or no devices all give an empty `gpus`
// list with `note` saying why, so the caller can show it as it is. A field
// NVML will not report for one device (some are unsupported on MIG or older
// boards) is left at its "unknown" value and named in `note`.
//
// Thread-safety: query_gpus() may be called from any thread; each call opens
// and closes its own NVML reference (milliseconds; call it per request, not
// per frame).

#include <cstdint>
#include <string>
#include <vector>

namespace runsnack {

struct GpuInfo {
  int index = 0;                   // NVML index, as in CUDA_VISIBLE_DEVICES (with PCI bus order)
  std::string name;                // e.g. "NVIDIA H100 80GB HBM3"; "" unknown
  std::string uuid;                // e.g. "GPU-5a1c..."; "" unknown
  std::uint64_t memory_total = 0;  // bytes
  std::uint64_t memory_used = 0;   // bytes
  int utilization_pct = -1;        // 0..100; -1 unknown
  int temperature_c = -1;          // degrees Celsius; -1 unknown
};

struct GpuReport {
  bool nvml_loaded = false;
  std::string driver_version;  // e.g. "550.54.14"; "" unknown
  std::string cuda_version;    // highest CUDA the driver supports, e.g. "12.4"; "" unknown
  std::vector<GpuInfo> gpus;
  std::string note;  // why the list is empty or incomplete; "" when all is well
};

// The GPUs with the given NVML indices (all when empty), in index order.
// An index that does not exist is left out and named in `note`.
GpuReport query_gpus(const std::vector<int>& only_indices);

// "12.4" for NVML's 12040.
std::string cuda_version_text(int nvml_cuda_version);

}  // namespace runsnack
