// The matmul workload's verification cost: every tile of an N x N seeded
// product computed as a worker does (BLAS sgemm), then checked as the
// coordinator does (Freivalds, B_j*r shared by a column's tiles), and the
// check's time (its halves made from the seed included) printed as a fraction of the compute time.
//   matmul_bench [N] [BLOCK] [ROUNDS]      (default 4096 1024 10)
#include "pool/matmul/matrix.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>

using namespace runsnack::pool::matmul;

namespace {
double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

int main(int argc, char** argv) {
  const std::int64_t n = argc > 1 ? std::atoll(argv[1]) : 4096;
  const std::int64_t b = argc > 2 ? std::atoll(argv[2]) : 1024;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 10;
  if (n <= 0 || b <= 0 || n % b != 0 || rounds <= 0) {
    std::fprintf(stderr, "usage: matmul_bench [N] [BLOCK dividing N] [ROUNDS]\n");
    return 2;
  }
  // As the worker and the coordinator do it (workloads/matmul_workload.cpp):
  // the worker makes its operands from the seed and multiplies; the
  // coordinator makes each row's and column's half of the check once,
  // straight from the seed, then checks each tile.
  double compute = 0, check = 0, setup = 0, max_err = 0;
  int rejected = 0;
  std::map<std::int64_t, Matrix> b_cols, r_cols, right;
  for (std::int64_t i = 0; i < n / b; ++i) {
    auto t = std::chrono::steady_clock::now();
    Matrix a_rows = seeded_block(1, 'A', n, i * b, b, 0, n);
    setup += since(t);
    t = std::chrono::steady_clock::now();
    Matrix s_i = freivalds_vectors(42, 2 * static_cast<std::uint64_t>(i), b, rounds);
    Matrix left = seeded_left_side(1, n, i * b, s_i);
    check += since(t);
    for (std::int64_t j = 0; j < n / b; ++j) {
      t = std::chrono::steady_clock::now();
      if (!b_cols.count(j)) b_cols[j] = seeded_block(1, 'B', n, 0, n, j * b, b);
      setup += since(t);
      t = std::chrono::steady_clock::now();
      Matrix c = multiply(a_rows, b_cols[j]);  // the worker's part
      compute += since(t);
      t = std::chrono::steady_clock::now();
      if (!r_cols.count(j)) {
        r_cols[j] = freivalds_vectors(42, 2 * static_cast<std::uint64_t>(j) + 1, b, rounds);
        right[j] = seeded_right_side(1, n, j * b, r_cols[j]);
      }
      auto out = freivalds_check(s_i, r_cols[j], left, right[j], c, 1e-5);
      check += since(t);
      if (!out.accepted) ++rejected;
      if (out.max_error > max_err) max_err = out.max_error;
    }
  }
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  std::printf("matmul n=%lld block=%lld rounds=%d: compute %.3f s (%.1f GFLOP/s), Freivalds %.4f s = %.2f%% of compute; "
              "worker operand generation %.3f s (not in compute); honest tiles rejected %d; largest check error %.2e (tolerance 1e-5)\n",
              static_cast<long long>(n), static_cast<long long>(b), rounds, compute, flops / compute / 1e9, check,
              100.0 * check / compute, setup, rejected, max_err);
  return rejected == 0 ? 0 : 1;
}
