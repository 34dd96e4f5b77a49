#pragma once
// Whether this provider can serve the "cuda" service, for the info service's
// report and the cuda service's check (services/cuda/cuda_service.hpp).

#include <nlohmann/json.hpp>

namespace runsnack {

inline constexpr const char* kServiceCuda = "cuda";

// RUNSNACK_CUDA_BACKEND=host: the cuda-server's host-RAM test double (no GPU; only its test kernels run).
bool cuda_host_backend();

// What the provider can offer: {"available":bool,"backend":"driver"|"host","note":"..."}.
nlohmann::json cuda_availability();

}  // namespace runsnack
