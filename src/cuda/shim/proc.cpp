// cuGetProcAddress (by the generated table) and cuGetExportTable.
#include "cuda/shim/client.hpp"
#include "cuda/shim/export_tables.hpp"
#include "cuda/shim/proc_table.h"

#include <cuda.h>

#include <cstdio>
#include <cstring>
#include <string_view>
#include <unordered_map>

#define API extern "C" __attribute__((visibility("default"))) CUresult CUDAAPI

namespace shim = runsnack::cuda::shim;

extern "C" int runsnack_cuda_unimplemented(const char* name) {
  shim::warn_once("not implemented yet, returning CUDA_ERROR_NOT_SUPPORTED", name);
  return CUDA_ERROR_NOT_SUPPORTED;
}

namespace {

const std::unordered_multimap<std::string_view, const runsnack_proc_entry*>& by_name() {
  static auto* m = [] {
    auto* out = new std::unordered_multimap<std::string_view, const runsnack_proc_entry*>;
    for (unsigned i = 0; i < runsnack_proc_table_size; ++i) out->emplace(runsnack_proc_table[i].name, &runsnack_proc_table[i]);
    return out;
  }();
  return *m;
}

// The newest variant not newer than `version`, per-thread when asked and available.
CUresult lookup(const char* symbol, void** pfn, int version, cuuint64_t flags, CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  if (shim::trace()) std::fprintf(stderr, "runsnack cuda trace: cuGetProcAddress(\"%s\", %d, %llu)\n", symbol, version,
                                  static_cast<unsigned long long>(flags));
  auto [begin, end] = by_name().equal_range(symbol);
  if (begin == end && *symbol == '\0') {
    // cudart probes with an empty name at start-up and expects "not found".
    if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
  }
  if (begin == end) {
    if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    shim::warn_once("unknown driver symbol requested from cuGetProcAddress", symbol);
    return CUDA_ERROR_NOT_FOUND;
  }
  bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  const runsnack_proc_entry* best = nullptr;
  const runsnack_proc_entry* best_pt = nullptr;
  for (auto it = begin; it != end; ++it) {
    const auto* e = it->second;
    if (e->version > version) continue;
    auto*& slot = e->per_thread ? best_pt : best;
    if (slot == nullptr || e->version > slot->version) slot = e;
  }
  if (per_thread && best_pt != nullptr && (best == nullptr || best_pt->version >= best->version)) best = best_pt;
  if (best == nullptr) {
    if (status != nullptr) *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    return CUDA_ERROR_NOT_FOUND;
  }
  *pfn = best->address;
  if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

}  // namespace

API cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                        CUdriverProcAddressQueryResult* status) {
  return lookup(symbol, pfn, version, flags, status);
}
#undef cuGetProcAddress  // the 11.3 entry point under its own name
API cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  return lookup(symbol, pfn, version, flags, nullptr);
}

API cuGetExportTable(const void** table, const CUuuid* id) {
  if (table == nullptr || id == nullptr) return CUDA_ERROR_INVALID_VALUE;
  bool known = false;
  *table = shim::export_table(reinterpret_cast<const std::uint8_t*>(id->bytes), known);
  char hex[40];
  for (int i = 0; i < 16; ++i) std::snprintf(hex + 2 * i, 3, "%02x", static_cast<unsigned char>(id->bytes[i]));
  if (shim::trace()) std::fprintf(stderr, "runsnack cuda trace: cuGetExportTable(%s) -> %s\n", hex, *table ? "table" : "none");
  if (*table != nullptr) return CUDA_SUCCESS;
  if (known) return CUDA_ERROR_NOT_FOUND;
  shim::warn_once("unknown export table requested from cuGetExportTable", hex);
  return CUDA_ERROR_NOT_FOUND;
}
