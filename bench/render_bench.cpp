// render_bench: path-tracer throughput of the render workload's library on
// this machine, in Mpixel-samples/s, for each thread count asked for, with
// the parallel efficiency against the first (docs/RENDER.md has figures).
//
//   render_bench [--scene FILE] [--width 3840] [--height 2160] [--spp 4]
//                [--threads 1 2 ...] [--seed 1] [--max-depth 8] [--gpu] [--out image.png]
//
// Renders the whole image with render_rect (or render_rect_gpu with --gpu);
// --out writes the last render as a PNG. Each line also gives the process's
// CPU time over the wall time ("cores busy"): on a shared machine a figure
// under the thread count means the threads did not get a core each.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "pool/render/gpu_render.hpp"
#include "pool/render/png_codec.hpp"
#include "pool/render/render.hpp"
#include "pool/render/scene_parser.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace runsnack::render;
  CLI::App app{"render_bench: path tracer throughput"};
  std::string scene_path = "examples/scenes/cornell.json", out_path;
  RenderSettings s;
  s.width = 3840;
  s.height = 2160;
  s.spp = 4;
  std::vector<int> threads{1};
  bool gpu = false;
  app.add_option("--scene", scene_path, "scene file (docs/SCENES.md)");
  app.add_option("--width", s.width);
  app.add_option("--height", s.height);
  app.add_option("--spp", s.spp, "samples per pixel");
  app.add_option("--threads", threads, "CPU thread counts to measure, in turn");
  app.add_option("--seed", s.seed);
  app.add_option("--max-depth", s.max_depth);
  app.add_flag("--gpu", gpu, "render on the CUDA device instead");
  app.add_option("--out", out_path, "write the last render to this PNG file");
  CLI11_PARSE(app, argc, argv);

  std::ifstream in(scene_path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "render_bench: cannot read %s\n", scene_path.c_str());
    return 1;
  }
  std::ostringstream text;
  text << in.rdbuf();
  auto start = Clock::now();
  auto scene = parse_scene(text.str());
  if (!scene) {
    std::fprintf(stderr, "render_bench: %s\n", scene.error().what().c_str());
    return 1;
  }
  std::printf(
      "render_bench: %s, %dx%d, %d spp, max depth %d; %zu triangles, %zu spheres, parsed in %.1f ms\n",
      scene_path.c_str(), s.width, s.height, s.spp, s.max_depth, scene->triangles.size(),
      scene->spheres.size(), seconds_since(start) * 1e3);
  if (gpu && !gpu_render_available()) {
    std::fprintf(stderr, "render_bench: no CUDA device (built with CUDA: %s)\n",
                 gpu_render_compiled() ? "yes" : "no");
    return 1;
  }

  const TileRect whole{0, 0, s.width, s.height};
  const double samples = static_cast<double>(s.width) * s.height * s.spp;
  double first_rate = 0;
  RgbImage last;
  for (int t : gpu ? std::vector<int>{0} : threads) {
    s.threads = t;
    start = Clock::now();
    std::clock_t cpu_start = std::clock();
    auto img = gpu ? render_rect_gpu(*scene, s, whole) : render_rect(*scene, s, whole);
    double secs = seconds_since(start);
    double cores = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC / secs;
    if (!img) {
      std::fprintf(stderr, "render_bench: %s\n", img.error().what().c_str());
      return 1;
    }
    double rate = samples / secs / 1e6;
    if (gpu) {
      std::printf("gpu: %.2f s, %.1f Mpixel-samples/s\n", secs, rate);
    } else if (first_rate == 0) {
      first_rate = rate;
      std::printf("threads %d: %.2f s, %.2f Mpixel-samples/s, %.2f cores busy\n", t, secs, rate, cores);
    } else {
      double efficiency = rate / (first_rate * t / threads.front());
      std::printf(
          "threads %d: %.2f s, %.2f Mpixel-samples/s, %.2f cores busy, speed-up %.2fx, parallel efficiency "
          "%.0f%%\n",
          t, secs, rate, cores, rate / first_rate, efficiency * 100);
    }
    std::fflush(stdout);
    last = std::move(*img);
  }
  if (!out_path.empty()) {
    auto png = encode_png(last.width, last.height, last.rgb);
    if (!png) {
      std::fprintf(stderr, "render_bench: %s\n", png.error().what().c_str());
      return 1;
    }
    std::ofstream(out_path, std::ios::binary) << *png;
  }
  return 0;
}
