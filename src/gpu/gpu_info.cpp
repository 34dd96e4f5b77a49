#include "gpu/gpu_info.hpp"

#include <algorithm>
#include <climits>

#include "gpu/nvml.hpp"

namespace runsnack {
namespace {

void add_note(std::string& note, const std::string& text) {
  if (!note.empty()) note += "; ";
  note += text;
}

int clamp_to_int(unsigned value) { return value > INT_MAX ? INT_MAX : static_cast<int>(value); }

GpuInfo read_device(const Nvml& nvml, unsigned index, nvml::Device device, std::string& note) {
  GpuInfo info;
  info.index = static_cast<int>(index);
  std::vector<std::string> missing;
  if (auto v = nvml.name(device))
    info.name = *v;
  else
    missing.push_back("name");
  if (auto v = nvml.uuid(device))
    info.uuid = *v;
  else
    missing.push_back("uuid");
  if (auto v = nvml.memory(device)) {
    info.memory_total = v->total;
    info.memory_used = v->used;
  } else {
    missing.push_back("memory");
  }
  if (auto v = nvml.utilization(device))
    info.utilization_pct = clamp_to_int(std::min(v->gpu, 100u));
  else
    missing.push_back("utilization");
  if (auto v = nvml.temperature_c(device))
    info.temperature_c = clamp_to_int(*v);
  else
    missing.push_back("temperature");
  if (!missing.empty()) {
    std::string fields;
    for (const auto& m : missing) fields += (fields.empty() ? "" : ", ") + m;
    add_note(note, "GPU " + std::to_string(index) + ": no " + fields + " reported");
  }
  return info;
}

}  // namespace

std::string cuda_version_text(int v) {
  if (v <= 0) return {};
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

GpuReport query_gpus(const std::vector<int>& only_indices) {
  GpuReport report;
  auto nvml = Nvml::open();
  if (!nvml) {
    if (nvml.error().is(errc::unsupported))
      report.note = "no NVIDIA GPU on this machine (" + nvml.error().message + ")";
    else
      report.note = "NVIDIA driver present but not usable (" + nvml.error().message + ")";
    return report;
  }
  report.nvml_loaded = true;
  if (auto v = (*nvml)->driver_version()) report.driver_version = *v;
  if (auto v = (*nvml)->cuda_driver_version()) report.cuda_version = cuda_version_text(*v);

  auto count = (*nvml)->device_count();
  if (!count) {
    report.note = count.error().message;
    return report;
  }
  if (*count == 0) {
    report.note = "NVIDIA driver loaded but no GPU found";
    return report;
  }

  std::vector<int> wanted = only_indices;
  if (wanted.empty())
    for (unsigned i = 0; i < *count; ++i) wanted.push_back(static_cast<int>(i));
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());

  for (int index : wanted) {
    if (index < 0 || static_cast<unsigned>(index) >= *count) {
      add_note(report.note, "GPU " + std::to_string(index) + " not present (this machine has " +
                                std::to_string(*count) + ")");
      continue;
    }
    auto device = (*nvml)->device(static_cast<unsigned>(index));
    if (!device) {
      add_note(report.note, "GPU " + std::to_string(index) + ": " + device.error().message);
      continue;
    }
    report.gpus.push_back(read_device(**nvml, static_cast<unsigned>(index), *device, report.note));
  }
  return report;
}

}  // namespace runsnack
