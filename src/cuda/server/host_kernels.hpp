// The kernels the host test double runs: the test programs' own kernels
// (tests/cuda/vector_add.cu's `add`, tests/netlab/cuda_loop.cu's `bump`),
// written again in C++ over the double's memory. A launch's whole path (the
// shim's packing of the arguments, the wire, the server's dispatch, the
// device pointers) is then checked by the program's result, and a program
// that launches kernels runs to its end, so its synchronous round trips can
// be counted without a GPU. Any other kernel stays refused.
#pragma once

#include "cuda/wire.hpp"

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace runsnack::cuda {

struct HostLaunch {
  std::uint32_t grid[3];
  std::uint32_t block[3];
  const std::uint8_t* params;
  std::size_t params_size;
};

// The host bytes behind the device range [p, p + n), or nullptr when it is
// not inside one allocation.
using DeviceBytes = std::function<std::uint8_t*(std::uint64_t p, std::uint64_t n)>;

struct HostKernel {
  std::string_view name;                 // as mangled by nvcc
  std::vector<wire::Param> params;       // what cuFuncGetParamInfo says on a GPU
  int (*run)(const HostLaunch&, const DeviceBytes&);  // a CUresult
};

// The kernel of that mangled name, or nullptr.
const HostKernel* find_host_kernel(std::string_view name);

}  // namespace runsnack::cuda
