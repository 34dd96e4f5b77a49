// The matmul workload's verification cost. Every tile of an N x N seeded
// product is computed as a worker does (BLAS sgemm) and kept; then the
// tiles are checked twice:
//   1. with the check's parts timed apart (matrix.hpp): S_i'A_i and B_jR_j
//      made from the seed once per row/column of tiles, one pass per tile
//      (the tile in cache, as on the coordinator after decoding it);
//   2. end to end through the coordinator's own checker (the matmul
//      workload's ResultChecker), fed results as they arrive: the tile in a
//      binary frame (as workers send it), and as base64 in the message (as
//      older workers did; decoding included).
// Each as a fraction of the tiles' sgemm time. Checking after all compute
// keeps BLAS's spinning threads out of the check's time, as on a real
// coordinator (another machine). The machine is shared: every timed part
// runs `reps` times and its fastest run counts (compute per tile too).
//   matmul_bench [N] [BLOCK] [ROUNDS] [REPS]      (default 4096 1024 10 3)
#include "pool/matmul/matrix.hpp"
#include "pool/wire.hpp"
#include "pool/workload.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

using namespace runsnack::pool;
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
  const int reps = argc > 4 ? std::atoi(argv[4]) : 3;
  if (n <= 0 || b <= 0 || n % b != 0 || rounds <= 0 || rounds > 64 || reps < 1) {
    std::fprintf(stderr, "usage: matmul_bench [N] [BLOCK dividing N] [ROUNDS 1..64] [REPS]\n");
    return 2;
  }
  const std::int64_t nb = n / b;
  // The worker's part: operands from the seed (not timed as compute), sgemm.
  double compute = 0, setup = 0;
  std::vector<Matrix> tiles;
  std::vector<Matrix> b_cols(static_cast<std::size_t>(nb));
  for (std::int64_t i = 0; i < nb; ++i) {
    auto t = std::chrono::steady_clock::now();
    Matrix a_rows = seeded_lines(1, 'A', n, i * b, b);
    setup += since(t);
    for (std::int64_t j = 0; j < nb; ++j) {
      auto& bj = b_cols[static_cast<std::size_t>(j)];
      t = std::chrono::steady_clock::now();
      if (bj.data.empty()) bj = seeded_lines(1, 'B', n, j * b, b);  // B_j's columns
      setup += since(t);
      double best = 1e300;
      for (int rep = 0; rep < reps; ++rep) {
        t = std::chrono::steady_clock::now();
        Matrix c = multiply_transposed(a_rows, bj);
        best = std::min(best, since(t));
        if (rep == 0) tiles.push_back(std::move(c));
      }
      compute += best;
    }
  }
  b_cols.clear();

  // 1. The check's parts.
  double left_s = 1e300, right_s = 1e300, pass_s = 1e300, max_err = 0;
  int rejected = 0;
  for (int rep = 0; rep < reps; ++rep) {
  double l_s = 0, r_s = 0, p_s = 0;
  std::vector<FreivaldsSide> rows(static_cast<std::size_t>(nb)), cols(rows.size());
  for (std::int64_t i = 0; i < nb; ++i) {
    auto t = std::chrono::steady_clock::now();
    Matrix s = freivalds_vectors(42, 2 * static_cast<std::uint64_t>(i), b, rounds);
    Matrix left = seeded_left_side(1, n, i * b, s);
    rows[static_cast<std::size_t>(i)] = freivalds_side(std::move(s), std::move(left));
    l_s += since(t);
    t = std::chrono::steady_clock::now();
    Matrix r = freivalds_vectors(42, 2 * static_cast<std::uint64_t>(i) + 1, b, rounds);
    Matrix right = seeded_right_side(1, n, i * b, r);
    cols[static_cast<std::size_t>(i)] = freivalds_side(std::move(r), std::move(right));
    r_s += since(t);
  }
  for (std::int64_t i = 0; i < nb; ++i)
    for (std::int64_t j = 0; j < nb; ++j) {
      // The tile as the coordinator holds it, just decoded from its message
      // (in cache); not timed here, part 2 times the decoding.
      const Matrix tile = tiles[static_cast<std::size_t>(i * nb + j)];
      auto t = std::chrono::steady_clock::now();
      auto out = freivalds_check(rows[static_cast<std::size_t>(i)], cols[static_cast<std::size_t>(j)], tile, 1e-5);
      p_s += since(t);
      rejected += !out.accepted;
      if (out.max_error > max_err) max_err = out.max_error;
    }
  left_s = std::min(left_s, l_s), right_s = std::min(right_s, r_s), pass_s = std::min(pass_s, p_s);
  }
  const double parts = left_s + right_s + pass_s;

  // 2. The coordinator's checker, fed result messages as the workers send them.
  const Workload* w = find_workload("matmul");
  const nlohmann::json spec = {{"source", "seed"}, {"seed", 1}, {"m", n}, {"k", n}, {"p", n}, {"block", b}, {"rounds", rounds},
                               {"tolerance", 1e-5}};
  if (auto c = w->checker(spec, nlohmann::json::object()); !c) {
    std::fprintf(stderr, "%s\n", c.error().what().c_str());
    return 1;
  }
  // As workers send tiles now (a binary frame) and as older workers did
  // (base64 in the JSON message).
  std::vector<TaskResult> framed(tiles.size()), base64(tiles.size());
  for (std::size_t index = 0; index < tiles.size(); ++index) {
    framed[index].stdout_data = base64[index].stdout_data = nlohmann::json{{"compute_s", 1.0}}.dump();
    framed[index].files = nlohmann::json::array({{{"path", "tile.f32"}, {"frame", 0}}});
    framed[index].frames.push_back(to_bytes(tiles[index]));
    base64[index].files = nlohmann::json::array({{{"path", "tile.f32"}, {"data", base64_encode(to_bytes(tiles[index]))}}});
  }
  tiles.clear();
  int coordinator_rejected = 0;
  auto run_checker = [&](const std::vector<TaskResult>& results) {
    double best = 1e300;
    for (int rep = 0; rep < reps; ++rep) {
      auto checker_rep = w->checker(spec, nlohmann::json::object());  // a fresh one: its halves are made again
      double c_s = 0;
      for (std::size_t index = 0; index < results.size(); ++index) {
        const TaskResult arrived = results[index];  // just read off the stream: in cache, as on the coordinator
        auto t = std::chrono::steady_clock::now();
        coordinator_rejected += !(*checker_rep)->check(static_cast<std::int64_t>(index), arrived).accepted;
        c_s += since(t);
      }
      best = std::min(best, c_s);
    }
    return best;
  };
  const double coordinator_s = run_checker(framed), base64_s = run_checker(base64);

  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  std::printf("matmul n=%lld block=%lld rounds=%d, fastest of %d runs (a wrong tile passes with probability <= 2^-%d): compute %.3f s (%.1f GFLOP/s)\n"
              "  Freivalds %.4f s = %.2f%% of compute: S'A from the seed %.4f s, BR from the seed %.4f s, %lld tile passes %.4f s\n"
              "  coordinator's checker, tiles in binary frames %.4f s = %.2f%% of compute (as base64, decoding included: %.4f s = %.2f%%)\n"
              "  worker operand generation %.3f s (not in compute); honest tiles rejected %d + %d; largest check error %.2e (tolerance 1e-5)\n",
              static_cast<long long>(n), static_cast<long long>(b), rounds, reps, rounds, compute, flops / compute / 1e9, parts,
              100.0 * parts / compute, left_s, right_s, static_cast<long long>(nb * nb), pass_s, coordinator_s,
              100.0 * coordinator_s / compute, base64_s, 100.0 * base64_s / compute, setup, rejected, coordinator_rejected, max_err);
  // What the job's final `--wait --json` line reports: the coordinator's
  // checker time (ResultChecker::check) over the workers' sgemm time.
  const char* threads = std::getenv("OPENBLAS_NUM_THREADS");
  std::printf("%s\n", nlohmann::json{{"verification", {{"method", "freivalds"}, {"rounds", rounds}, {"checked", nb * nb},
                                                        {"rejected", coordinator_rejected / reps / 2}, {"cost_fraction", coordinator_s / compute},
                                                        {"check_only_fraction", parts / compute}}},
                                     {"compute_seconds", compute}, {"blas_threads", threads ? threads : "OpenBLAS default"}}
                                .dump()
                                .c_str());
  return rejected + coordinator_rejected == 0 ? 0 : 1;
}
