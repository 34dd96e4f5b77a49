// kernel_bench: the native side of bench/wasm_bench.py. Runs the requests
// that src/pool/wasm/run_kernels.mjs runs in WebAssembly, with the native
// worker's code (OpenBLAS sgemm, render_rect on `--threads` threads, 0 = all
// cores, as a worker), each `--reps` times, and prints one JSON line per
// request with its fastest time: {"i", "seconds"}.
//
//   kernel_bench REQUESTS.json [--threads 0] [--reps 3]
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>

#include "pool/matmul/matrix.hpp"
#include "pool/render/render.hpp"
#include "pool/render/scene_parser.hpp"
#include "pool/render/tiles.hpp"

int main(int argc, char** argv) {
  using namespace runsnack;
  CLI::App app{"kernel_bench: native matmul and render tiles, timed (bench/wasm_bench.py)"};
  std::string requests_path;
  int threads = 0, reps = 3;
  app.add_option("requests", requests_path, "requests, as src/pool/wasm/run_kernels.mjs reads them")->required();
  app.add_option("--threads", threads, "render threads (0: all cores); BLAS follows OPENBLAS_NUM_THREADS");
  app.add_option("--reps", reps, "runs of each request; the fastest counts");
  CLI11_PARSE(app, argc, argv);

  std::ifstream in(requests_path);
  const auto requests = nlohmann::json::parse(in);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const auto& r = requests[i];
    double best = 1e300;
    for (int rep = 0; rep < reps; ++rep) {
      const auto start = std::chrono::steady_clock::now();
      if (r.contains("matmul")) {
        const auto& m = r["matmul"];
        const std::uint64_t seed = m["seed"];
        const std::int64_t k = m["k"];
        auto a = pool::matmul::seeded_lines(seed, 'A', k, m["r0"], m["rows"]);
        auto bt = pool::matmul::seeded_lines(seed, 'B', k, m["c0"], m["cols"]);
        auto c = pool::matmul::multiply_transposed(a, bt);
        if (c.data.empty()) return 1;
      } else {
        static std::string loaded;
        static std::optional<render::Scene> scene;
        const auto& q = r["render"];
        if (loaded != q["scene"].get<std::string>()) {
          std::ifstream f(q["scene"].get<std::string>(), std::ios::binary);
          std::ostringstream text;
          text << f.rdbuf();
          scene = render::parse_scene(text.str()).value();
          loaded = q["scene"];
        }
        const auto& spec = q["spec"];
        render::RenderSettings s;
        s.width = spec["width"], s.height = spec["height"], s.spp = spec["spp"], s.max_depth = spec["max_depth"];
        s.seed = spec["seed"], s.threads = threads;
        auto tiles = render::split_tiles(s.width, s.height, spec["tile"], spec["overlap"]).value();
        auto image = render::render_rect(*scene, s, tiles.at(q["index"].get<std::size_t>()).rendered);
        if (!image) return 1;
      }
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::printf("{\"i\": %zu, \"seconds\": %.6f}\n", i, best);
  }
  return 0;
}
