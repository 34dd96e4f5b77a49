#pragma once
// A training job's weights file: named float32 tensors in the safetensors
// layout, so PyTorch, NumPy and the `safetensors` package read and write it,
// and examples/train/runsnack_train.py does with only the standard library.
//
//   +-------------------+------------------------------------+---------------------------+
//   | header length N   | header: N bytes of UTF-8 JSON      | data: the tensors' values |
//   | u64 little-endian | (padded with spaces to 8-aligned)  | f32 little-endian, packed |
//   +-------------------+------------------------------------+---------------------------+
//   header = {"fc1.weight": {"dtype": "F32", "shape": [10, 5], "data_offsets": [0, 200]},
//             "fc1.bias":   {"dtype": "F32", "shape": [10],    "data_offsets": [200, 240]},
//             "__metadata__": {"round": "3"}}          (optional; string values only)
// data_offsets are [begin, end) in bytes from the start of the data. Sorted by
// begin they tile the data exactly: the first begins at 0, each begins where
// the previous ends, the last ends at the end of the file.
//
// Pure functions: no I/O, no clock; safe to call from any thread.

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"

namespace runsnack::pool::training {

// Bounds on what parse_weights accepts, each far above a small model (a
// ResNet-50 has ~320 tensors, names under 80 bytes, rank 4) and each
// keeping a hostile file from costing more than it is worth to refuse.
inline constexpr std::size_t kMaxHeaderBytes = 1 << 20;  // the JSON is parsed into a tree, ~10x its size
inline constexpr std::size_t kMaxTensors = 4096;
inline constexpr std::size_t kMaxNameBytes = 256;
inline constexpr std::size_t kMaxRank = 8;
// The default bound on the data section, also the per-round weights bound:
// every worker moves the file twice a round and the coordinator holds one
// copy per worker plus a few (reference, momentum, average) while it checks
// and averages, so 256 MiB (~67M float32 parameters, a "small model" with room to
// spare) keeps a round to minutes on a home uplink and the coordinator's
// memory to a few GiB. A job may pass a smaller bound.
inline constexpr std::uint64_t kDefaultMaxDataBytes = std::uint64_t{256} << 20;

struct Tensor {
  std::vector<std::int64_t> shape;  // empty for a scalar
  std::vector<float> values;        // row-major; as many as the shape's product

  bool operator==(const Tensor&) const = default;
};

// Named tensors. std::map keeps the names sorted, so two equal sets encode to
// equal bytes (and so to the same content address).
struct Weights {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;  // safetensors' "__metadata__"

  bool operator==(const Weights&) const = default;
};

// The shape's element count, or -1 if a dimension is negative or the count
// would pass max_values.
std::int64_t element_count(const std::vector<std::int64_t>& shape, std::uint64_t max_values);

// Parses a weights file. Never throws, never reads outside `bytes`, and
// allocates little beyond the input: the header's JSON tree (its text bounded
// by kMaxHeaderBytes, nesting past a safetensors header's never built) and the
// values (as many bytes as the data section). Fails with errc::malformed (bad layout, a dtype
// other than F32, offsets that overlap, leave gaps or disagree with the shape)
// or errc::too_large (a bound passed); the message names the tensor at fault.
Result<Weights> parse_weights(std::string_view bytes, std::uint64_t max_data_bytes = kDefaultMaxDataBytes);

// The file for `weights`, tensors in name order, laid out as parse_weights
// expects. Fails (errc::invalid_argument or errc::too_large) where the result
// would not parse: an empty or reserved name, a bound passed, values that do
// not match the shape.
Result<std::string> encode_weights(const Weights& weights,
                                   std::uint64_t max_data_bytes = kDefaultMaxDataBytes);

}  // namespace runsnack::pool::training
