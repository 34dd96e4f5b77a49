#pragma once
// The matmul workload's arithmetic, pure and I/O-free: row-major float32
// matrices, their deterministic generation from a seed, block products
// through BLAS, Freivalds' check of a block product, and the .npy format
// users read and write with numpy.
//
// Freivalds: a tile C_ij = A_i * B_j is checked from both sides as
//   S_i' * C_ij * R_j == (S_i' * A_i) * (B_j * R_j)
// with secret random 0/1 matrices S_i (tile rows x (k+1), one per row of
// tiles) and R_j (tile columns x (k+1), one per column of tiles). S_i' * A_i
// and B_j * R_j are made once and shared by a whole row or column, so a tile
// costs one pass over its numbers: a small share of the O(n^3) product.
// 0/1 sums are made by bucketing rows on their bit patterns, 6 bits at a
// time (matrix.cpp), so a pass costs ceil((k+1)/6) additions per entry.
// Soundness: if D = C_ij - A_i B_j is nonzero, each column of R_j leaves
// D * r nonzero with probability >= 1/2, and then each column of S_i sees it
// with probability >= 1/2, so a wrong tile passes with probability at most
// 2 * 2^-(k+1) = 2^-k. Float32 needs a tolerance: differences below it
// (rounding) pass by design; the bound holds for errors above it.

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
// an odd multiple of 1/16 in (-1, 1), uniform, a pure function of (seed, which,
// r, c), so any block can be made anywhere without the others. A is made by
// rows and B by columns ("lines", matrix.cpp): four random bits an entry,
// and every partial sum of a product of them is exact in float32.
float seeded_entry(std::uint64_t seed, char which, std::int64_t n, std::int64_t r, std::int64_t c);
// Lines [first, first+count) as the rows of a count x n matrix: rows of A,
// or columns of B (the rows of B's transpose), made the fast way.
Matrix seeded_lines(std::uint64_t seed, char which, std::int64_t n, std::int64_t first, std::int64_t count);
// Rows [row0, row0+rows) x columns [col0, col0+cols) of that matrix.
Matrix seeded_block(std::uint64_t seed, char which, std::int64_t n, std::int64_t row0, std::int64_t rows,
                    std::int64_t col0, std::int64_t cols);
// Rows/columns of an existing matrix.
Matrix sub_block(const Matrix& m, std::int64_t row0, std::int64_t rows, std::int64_t col0, std::int64_t cols);

// c = a * b (BLAS sgemm); a.cols must equal b.rows.
Matrix multiply(const Matrix& a, const Matrix& b);
// c = a * bt' (sgemm reading bt transposed): a seeded tile from A's rows and
// B's columns as seeded_lines makes them.
Matrix multiply_transposed(const Matrix& a, const Matrix& bt);

struct FreivaldsOutcome {
  bool accepted = false;
  double max_error = 0;  // largest difference seen, relative to the check's magnitude
};

// The secret 0/1 vectors for k = `rounds`: rows x (rounds + 1), from a
// coordinator-side secret (workers never see it); `stream` tells row blocks
// and column blocks apart.
Matrix freivalds_vectors(std::uint64_t secret, std::uint64_t stream, std::int64_t rows, int rounds);
Matrix transpose(const Matrix& m);

// The per-row and per-column halves of the check, made once and shared by
// every tile of that row or column.
Matrix left_side(const Matrix& s_i, const Matrix& a_rows);   // S_i' * A_i: (k+1) x n
Matrix right_side(const Matrix& b_cols, const Matrix& r_j);  // (B_j * R_j)': (k+1) x n

// The same halves for a seeded matrix, made row by row without holding it
// (the coordinator never materialises A or B of a seeded job).
Matrix seeded_left_side(std::uint64_t seed, std::int64_t n, std::int64_t row0, const Matrix& s_i);
Matrix seeded_right_side(std::uint64_t seed, std::int64_t n, std::int64_t col0, const Matrix& r_j);

// Everything a row (or column) of tiles shares, made once: the vectors, as
// the tile passes read them, and the half of the check made from A or B.
struct FreivaldsSide {
  Matrix vectors;                      // S_i or R_j: rows x (k+1), 0/1
  Matrix transposed;                   // their transpose
  std::vector<std::uint8_t> patterns;  // each row's bits, 6 to a byte (matrix.cpp)
  Matrix sums;                         // S_i' * A_i, or (B_j * R_j)': (k+1) x n
};
FreivaldsSide freivalds_side(Matrix vectors, Matrix sums);

// Checks tile c = C_ij against row i's and column j's sides within
// `tolerance`, relative to the size of the sums (float32 rounding grows
// with the inner dimension n and the tile).
FreivaldsOutcome freivalds_check(const FreivaldsSide& row, const FreivaldsSide& col, const Matrix& c, double tolerance);
// The same for a tile as raw little-endian float32 rows (to_bytes(), a
// binary frame), checked where it lies: rows x cols, or it is rejected.
FreivaldsOutcome freivalds_check(const FreivaldsSide& row, const FreivaldsSide& col, std::string_view tile, std::int64_t rows,
                                 std::int64_t cols, double tolerance);

// .npy (version 1.0/2.0/3.0, dtype '<f4', C order, two dimensions): the
// format numpy.save writes. Strict: anything else is a one-line error.
Result<Matrix> parse_npy(std::string_view bytes);
std::string encode_npy(const Matrix& m);

// Raw little-endian float32 rows (a block's result on the wire).
std::string to_bytes(const Matrix& m);
Result<Matrix> from_bytes(std::string_view bytes, std::int64_t rows, std::int64_t cols);

}  // namespace runsnack::pool::matmul
