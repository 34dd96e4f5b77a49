#include "cuda/server/host_kernels.hpp"

#include "cuda/server/backend.hpp"

#include <algorithm>
#include <cstring>

namespace runsnack::cuda {
namespace {
constexpr int kErrIllegalAddress = 700;  // what a GPU reports for an access outside memory

template <typename T>
T arg(const HostLaunch& l, std::size_t offset) {
  T v{};
  std::memcpy(&v, l.params + offset, sizeof v);
  return v;
}

// The threads along x a 1-D kernel `if (i < n)` covers: grid.x * block.x, capped by n.
std::uint64_t covered(const HostLaunch& l, std::int32_t n) {
  if (n <= 0) return 0;
  return std::min<std::uint64_t>(static_cast<std::uint64_t>(n), std::uint64_t{l.grid[0]} * l.block[0]);
}

// add(const float* a, const float* b, float* c, int n): c[i] = a[i] + b[i].
int run_add(const HostLaunch& l, const DeviceBytes& bytes) {
  const std::uint64_t count = covered(l, arg<std::int32_t>(l, 24));
  if (count == 0) return kSuccess;
  auto* a = bytes(arg<std::uint64_t>(l, 0), count * sizeof(float));
  auto* b = bytes(arg<std::uint64_t>(l, 8), count * sizeof(float));
  auto* c = bytes(arg<std::uint64_t>(l, 16), count * sizeof(float));
  if (a == nullptr || b == nullptr || c == nullptr) return kErrIllegalAddress;
  for (std::uint64_t i = 0; i < count; ++i) {
    float x, y;
    std::memcpy(&x, a + i * sizeof x, sizeof x);
    std::memcpy(&y, b + i * sizeof y, sizeof y);
    const float z = x + y;
    std::memcpy(c + i * sizeof z, &z, sizeof z);
  }
  return kSuccess;
}

// bump(unsigned* p, int n): p[i] += 1.
int run_bump(const HostLaunch& l, const DeviceBytes& bytes) {
  const std::uint64_t count = covered(l, arg<std::int32_t>(l, 8));
  if (count == 0) return kSuccess;
  auto* p = bytes(arg<std::uint64_t>(l, 0), count * sizeof(std::uint32_t));
  if (p == nullptr) return kErrIllegalAddress;
  for (std::uint64_t i = 0; i < count; ++i) {
    std::uint32_t v;
    std::memcpy(&v, p + i * sizeof v, sizeof v);
    ++v;
    std::memcpy(p + i * sizeof v, &v, sizeof v);
  }
  return kSuccess;
}

const std::vector<HostKernel>& kernels() {
  static const std::vector<HostKernel> all = {
      {"_Z3addPKfS0_Pfi", {{0, 8}, {8, 8}, {16, 8}, {24, 4}}, run_add},
      {"_Z4bumpPji", {{0, 8}, {8, 4}}, run_bump},
  };
  return all;
}
}  // namespace

const HostKernel* find_host_kernel(std::string_view name) {
  for (const auto& k : kernels()) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

}  // namespace runsnack::cuda
