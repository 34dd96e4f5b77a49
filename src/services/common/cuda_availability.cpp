#include "services/common/cuda_availability.hpp"

#include "cuda/server/driver_backend.hpp"

#include <cstdlib>
#include <string_view>

namespace runsnack {

bool cuda_host_backend() {
  const char* b = std::getenv("RUNSNACK_CUDA_BACKEND");
  return b && std::string_view(b) == "host";
}

nlohmann::json cuda_availability() {
  if (cuda_host_backend())
    return {{"available", true}, {"backend", "host"},
            {"note", "host-RAM test double (RUNSNACK_CUDA_BACKEND=host): no GPU, runs only its test kernels"}};
  if (auto driver = cuda::find_real_driver())
    return {{"available", true}, {"backend", "driver"}, {"note", "CUDA driver " + *driver}};
  return {{"available", false}, {"backend", "driver"}, {"note", "no CUDA driver (libcuda.so.1) on the provider"}};
}

}  // namespace runsnack
