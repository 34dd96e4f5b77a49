#pragma once
// The matmul workload's arithmetic, pure and I/O-free: row-major float32
// matrices, their deterministic generation from a seed, block products
// through BLAS, Freivalds' check of a block product, and the .npy format
// users read and write with numpy.
//
// Freivalds: C = A*B is checked as C*r == A*(B*r) for random 0/1 vectors r,
// O(n^2) work against O(n^3). If C is wrong in an entry by more than twice
// the tolerance, one round accepts it with probability at most 1/2, so k
// independent rounds accept a wrong block with probability at most 2^-k.

#include "core/error.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace runsnack::pool::matmul {

struct Matrix {
  std::int64_t rows = 0, cols = 0;
  std::vector<float> data;  // row-major, rows * cols
  float at(std::int64_t r, std::int64_t c) const { return data[static_cast<std::size_t>(r * cols + c)]; }
};

// Entry (r, c) of the n x n matrix `which` ('A' or 'B') of a seeded job:
// uniform in [-1, 1), a pure function of (seed, which, r, c), so any block
// can be made anywhere without the others.
float seeded_entry(std::uint64_t seed, char which, std::int64_t n, std::int64_t r, std::int64_t c);
// Rows [row0, row0+rows) x columns [col0, col0+cols) of that matrix.
Matrix seeded_block(std::uint64_t seed, char which, std::int64_t n, std::int64_t row0, std::int64_t rows,
                    std::int64_t col0, std::int64_t cols);
// Rows/columns of an existing matrix.
Matrix sub_block(const Matrix& m, std::int64_t row0, std::int64_t rows, std::int64_t col0, std::int64_t cols);

// c = a * b (BLAS sgemm); a.cols must equal b.rows.
Matrix multiply(const Matrix& a, const Matrix& b);

struct FreivaldsOutcome {
  bool accepted = false;
  double max_error = 0;  // largest |C*r - A*(B*r)| seen, relative to the tolerance scale
};

// The random 0/1 columns of one check: n x rounds, from a coordinator-side
// secret seed (workers never see it).
Matrix freivalds_vectors(std::uint64_t secret, std::int64_t n, int rounds);

// Checks c == a_rows * (b_cols * r) within `tolerance` (relative to the
// magnitudes involved, which float32 sums of length n need), for the
// rounds columns of r (b_cols.cols x rounds). `br` may be passed in
// precomputed (b_cols * r) so one column block's work is shared by every
// row block; pass an empty Matrix to compute it here.
FreivaldsOutcome freivalds_check(const Matrix& a_rows, const Matrix& b_cols, const Matrix& c, const Matrix& r,
                                 const Matrix& br, double tolerance);

// .npy (version 1.0/2.0/3.0, dtype '<f4', C order, two dimensions): the
// format numpy.save writes. Strict: anything else is a one-line error.
Result<Matrix> parse_npy(std::string_view bytes);
std::string encode_npy(const Matrix& m);

// Raw little-endian float32 rows (a block's result on the wire).
std::string to_bytes(const Matrix& m);
Result<Matrix> from_bytes(std::string_view bytes, std::int64_t rows, std::int64_t cols);

}  // namespace runsnack::pool::matmul
