// libFuzzer: .npy matrices come from consumers (pool submit matmul --a/--b)
// and are parsed by the coordinator.
#include "pool/matmul/matrix.hpp"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, std::size_t size) {
  auto m = runsnack::pool::matmul::parse_npy({reinterpret_cast<const char*>(data), size});
  if (m && m->data.size() != static_cast<std::size_t>(m->rows * m->cols)) __builtin_trap();
  return 0;
}
