// The undocumented tables cudart and the CUDA libraries ask the driver for
// by UUID (cuGetExportTable). docs/CUDA.md lists which are answered and how.
#pragma once

#include <cstdint>

namespace runsnack::cuda::shim {

// The table for a 16-byte id, or nullptr when the shim has none; `known`
// tells a table the shim deliberately refuses from one it has never seen.
const void* export_table(const std::uint8_t id[16], bool& known);

}  // namespace runsnack::cuda::shim
