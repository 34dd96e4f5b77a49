#pragma once
// JSON for HostInfo, GpuInfo and GpuReport, as they travel in the info
// service's reply. Keys are snake_case field names:
//
//   HostInfo:  {"hostname", "os", "kernel", "cpu_model", "cpu_count", "ram_total", "ram_available"}
//   GpuInfo:   {"index", "name", "uuid", "memory_total", "memory_used", "utilization_pct", "temperature_c"}
//   GpuReport: {"nvml_loaded", "driver_version", "cuda_version", "gpus": [GpuInfo...], "note"}
//
// The *_from_json functions read a peer's reply, so they are strict and
// bounded: every key present with the right type, strings at most
// kInfoStringMaxBytes (note: kInfoNoteMaxBytes), at most kMaxGpus GPUs,
// numbers in range. Unknown keys are ignored (a newer provider may add
// some). They return `malformed` or `too_large` and never throw.
//
// to_json is nlohmann's ADL hook, so `nlohmann::json j = report;` works. It
// emits only what from_json accepts: strings cut to their limit on a UTF-8
// boundary with invalid bytes replaced by '?', numbers clamped to their
// ranges, at most kMaxGpus GPUs; so it never throws on dump().
// There is deliberately no ADL from_json: `j.get<GpuReport>()` would throw.

#include <cstddef>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "gpu/gpu_info.hpp"
#include "gpu/host_info.hpp"

namespace runsnack {

inline constexpr std::size_t kInfoStringMaxBytes = 256;
inline constexpr std::size_t kInfoNoteMaxBytes = 1024;
inline constexpr std::size_t kMaxGpus = 64;

void to_json(nlohmann::json& j, const HostInfo& host);
void to_json(nlohmann::json& j, const GpuInfo& gpu);
void to_json(nlohmann::json& j, const GpuReport& report);

Result<HostInfo> host_info_from_json(const nlohmann::json& j);
Result<GpuInfo> gpu_info_from_json(const nlohmann::json& j);
Result<GpuReport> gpu_report_from_json(const nlohmann::json& j);

}  // namespace runsnack
