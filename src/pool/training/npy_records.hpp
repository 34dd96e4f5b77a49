#pragma once
// Splitting a dataset of .npy arrays by records (the first dimension), so that a
// training's --data folder of e.g. images.npy (N x 28 x 28) and labels.npy (N) becomes
// one shard per worker, each holding rows [i*N/W, (i+1)*N/W) of every array.
// Any dtype NumPy writes with a fixed item size ('<f4', '|u1', '<i8', ...), C order;
// versions 1.0-3.0 in, 1.0 out (2.0 when the header needs it). Pure.

#include "core/error.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace runsnack::pool::training {

struct NpyLayout {
  std::string descr;                // e.g. "<f4"
  std::vector<std::int64_t> shape;  // at least one dimension
  std::size_t item_bytes = 0;
  std::size_t data_offset = 0;      // where the values begin
};

// The array's layout, checked against the bytes: errc::malformed for what is not a C-order
// .npy of a fixed-size dtype, or whose values do not fill the rest of the file exactly.
Result<NpyLayout> parse_npy_layout(std::string_view bytes);

// Rows [begin, end) of the array as a .npy of its own.
Result<std::string> npy_rows(std::string_view bytes, const NpyLayout& layout, std::int64_t begin, std::int64_t end);

}  // namespace runsnack::pool::training
