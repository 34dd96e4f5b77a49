// render: a path-traced image (pool/render/) split into tiles with an
// overlap border. Workers render their tile's pixels (CUDA where the worker
// offers a GPU and the kernel was built, else all CPU cores), the submitter
// stitches the tiles with a blend across the borders into one PNG, and the
// coordinator shows each finished tile on the dashboard's live preview.
#include "core/json_fields.hpp"
#include "pool/render/gpu_render.hpp"
#include "pool/render/png_codec.hpp"
#include "pool/render/render.hpp"
#include "pool/render/scene_parser.hpp"
#include "pool/render/spot_check.hpp"
#include "pool/render/tile_wire.hpp"
#include "pool/render/tiles.hpp"
#include "pool/result_message.hpp"
#include "pool/wire.hpp"
#include "pool/workloads/builtin.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <future>
#include <mutex>
#include <random>
#include <thread>

namespace runsnack::pool {

namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kSceneFile = "scene.json";

struct RenderSpec {
  render::RenderSettings settings;
  int tile = 128, overlap = 8;
};

Result<RenderSpec> read_spec(const json& spec) {
  if (!spec.is_object()) return fail(errc::invalid_argument, "render: the spec must be an object");
  RenderSpec r;
  for (auto [key, out] : {std::pair<const char*, int*>{"width", &r.settings.width}, {"height", &r.settings.height},
                          {"spp", &r.settings.spp}, {"max_depth", &r.settings.max_depth}, {"tile", &r.tile},
                          {"overlap", &r.overlap}}) {
    if (!spec.contains(key) || !spec[key].is_number_integer()) return fail(errc::invalid_argument, std::string("render: no ") + key);
    auto v = spec[key].get<std::int64_t>();
    if (v < 0 || v > 1'000'000) return fail(errc::invalid_argument, std::string("render: bad ") + key);
    *out = static_cast<int>(v);
  }
  if (!spec.contains("seed") || !spec["seed"].is_number_unsigned()) return fail(errc::invalid_argument, "render: no seed");
  r.settings.seed = spec["seed"].get<std::uint64_t>();
  if (auto v = render::validate_settings(r.settings); !v) return v.error();
  return r;
}

// Parsing a big scene and building its BVH takes a while: a worker keeps
// the last one it used (tiles of one job come in runs).
class SceneCache {
 public:
  Result<std::shared_ptr<const render::Scene>> get(const fs::path& file) {
    std::lock_guard lock(mu_);
    if (scene_ && file == file_) return scene_;
    auto text = read_file(file, render::SceneLimits{}.max_bytes);
    if (!text) return text.error();
    auto scene = render::parse_scene(*text);
    if (!scene) return scene.error();
    scene_ = std::make_shared<const render::Scene>(std::move(*scene));
    file_ = file;
    return scene_;
  }

 private:
  std::mutex mu_;
  fs::path file_;
  std::shared_ptr<const render::Scene> scene_;
};

SceneCache& scene_cache() {
  static SceneCache cache;
  return cache;
}

struct Rendered {
  Result<render::RgbImage> image = fail(errc::internal, "not rendered");
  std::string device;
};

Rendered render_tile(std::shared_ptr<const render::Scene> scene, render::RenderSettings settings, render::TileRect rect,
                     bool try_gpu) {
  Rendered out;
  if (try_gpu && render::gpu_render_available()) {
    out.image = render::render_rect_gpu(*scene, settings, rect);
    out.device = "gpu";
    if (out.image) return out;  // else the CPU does it (a kernel error is not the task's fault)
  }
  out.image = render::render_rect(*scene, settings, rect);
  out.device = "cpu";
  return out;
}

// Pixels re-rendered per tile, fewer when each costs many samples: at most
// kCheckSamples samples a tile on the coordinator, at least two pixels.
constexpr int kCheckPixels = 16;
constexpr std::int64_t kCheckSamples = 1 << 18;

int check_pixels(int spp) {
  return static_cast<int>(std::clamp<std::int64_t>(kCheckSamples / std::max(spp, 1), 2, kCheckPixels));
}

// The tile a result carries (tile.bin, as base64 data or a binary frame).
Result<render::TileResult> tile_of(const TaskResult& result) {
  for (const auto& f : result.files)
    if (f.is_object() && string_or(f, "path") == "tile.bin") {
      if (auto i = frame_of(f, result.frames.size())) return render::decode_tile_result(result.frames[*i]);
      auto bytes = base64_decode(string_or(f, "data"));
      if (!bytes) return bytes.error();
      return render::decode_tile_result(*bytes);
    }
  return fail(errc::malformed, "no tile.bin in the result");
}

// On the coordinator: every tile is decoded, must cover its rectangle, and
// has a few pixels it could not predict re-rendered (render/spot_check.hpp).
class RenderChecker final : public ResultChecker {
 public:
  RenderChecker(RenderSpec spec, std::vector<render::Tile> tiles, render::Scene scene)
      : spec_(spec), tiles_(std::move(tiles)), scene_(std::move(scene)), rng_(std::random_device{}()) {}

  Verdict check(std::int64_t index, const TaskResult& result) override {
    double compute = 0;
    if (auto line = json::parse(result.stdout_data, nullptr, false); line.is_object() && line.contains("compute_s") &&
                                                                     line["compute_s"].is_number())
      compute = std::clamp(line["compute_s"].get<double>(), 0.0, 1e7);
    if (index < 0 || index >= static_cast<std::int64_t>(tiles_.size())) return {false, "no such tile", compute};
    const render::TileRect rect = tiles_[static_cast<std::size_t>(index)].rendered;
    auto tile = tile_of(result);
    if (!tile) return {false, "tile " + std::to_string(index) + " does not decode: " + tile.error().what(), compute};
    if (!(tile->rect == rect)) return {false, "tile " + std::to_string(index) + " covers the wrong pixels", compute};
    std::vector<std::pair<int, int>> pixels;
    std::uniform_int_distribution<int> xs(rect.x, rect.x + rect.w - 1), ys(rect.y, rect.y + rect.h - 1);
    for (int i = 0; i < check_pixels(spec_.settings.spp); ++i) pixels.emplace_back(xs(rng_), ys(rng_));
    auto out = render::spot_check(scene_, spec_.settings, rect, tile->pixels, pixels);
    if (!out) return {false, "tile " + std::to_string(index) + ": " + out.error().what(), compute};
    if (!out->accepted) return {false, "tile " + std::to_string(index) + ": " + out->why, compute};
    return {true, "", compute};
  }

 private:
  RenderSpec spec_;
  std::vector<render::Tile> tiles_;
  render::Scene scene_;
  std::mt19937_64 rng_;  // the coordinator's: a worker cannot know which pixels are checked
};

class RenderWorkload final : public Workload {
 public:
  std::string_view name() const override { return "render"; }

  Result<json> make_spec(const SubmitOptions& o, json& input) const override {
    if (o.scene_file.empty()) return fail(errc::invalid_argument, "render needs --scene FILE (see docs/SCENES.md)");
    auto text = read_file(o.scene_file, kMaxInputBytes);
    if (!text) return fail(errc::invalid_argument, text.error().what() + " (scenes travel with the job: 4 MiB at most)");
    if (auto scene = render::parse_scene(*text); !scene)
      return fail(errc::invalid_argument, o.scene_file + ": " + scene.error().what());
    input = {{"files", json::array({{{"path", kSceneFile}, {"data", base64_encode(*text)}}})}};
    json spec = {{"width", o.width}, {"height", o.height}, {"spp", o.spp},   {"max_depth", o.max_depth},
                 {"tile", o.tile},   {"overlap", o.overlap}, {"seed", o.seed}};
    if (auto p = plan(spec); !p) return p.error();
    return spec;
  }

  Result<JobPlan> plan(const json& spec) const override {
    auto r = read_spec(spec);
    if (!r) return r.error();
    auto tiles = render::split_tiles(r->settings.width, r->settings.height, r->tile, r->overlap);
    if (!tiles) return tiles.error();
    // A browser's JavaScript numbers hold seeds below 2^53 only (render_webgpu.js).
    constexpr std::uint64_t kBrowserSeeds = std::uint64_t{1} << 53;
    return JobPlan{static_cast<std::int64_t>(tiles->size()), r->settings.seed < kBrowserSeeds ? "render" : "render-seed64",
                   {{"image", {{"width", r->settings.width}, {"height", r->settings.height}}},
                    {"tile", r->tile}, {"overlap", r->overlap}, {"spp", r->settings.spp}}};
  }

  asio::awaitable<Result<TaskOutput>> run(TaskWork work) const override {
    auto r = read_spec(work.spec);
    if (!r) co_return r.error();
    auto tiles = render::split_tiles(r->settings.width, r->settings.height, r->tile, r->overlap);
    if (!tiles) co_return tiles.error();
    if (work.index < 0 || work.index >= static_cast<std::int64_t>(tiles->size())) co_return fail(errc::invalid_argument, "render: no such tile");
    const render::TileRect rect = (*tiles)[static_cast<std::size_t>(work.index)].rendered;
    auto scene = scene_cache().get(work.input_dir / kSceneFile);
    if (!scene) co_return scene.error();
    // The tracer runs on its own threads; this coroutine keeps heartbeating.
    const auto start = std::chrono::steady_clock::now();
    auto rendering = std::async(std::launch::async, render_tile, *scene, r->settings, rect, !work.limits.gpus.empty());
    asio::steady_timer timer(co_await asio::this_coro::executor);
    auto last_tick = start;
    while (rendering.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      timer.expires_after(std::chrono::milliseconds(20));
      co_await timer.async_wait(asio::use_awaitable);
      if (std::chrono::steady_clock::now() - last_tick > std::chrono::seconds(1)) {
        last_tick = std::chrono::steady_clock::now();
        (void)co_await work.tick();  // the tracer's threads cannot be stopped: a late tile is refused
      }
    }
    Rendered done = rendering.get();
    if (!done.image) co_return done.image.error();
    auto bytes = render::encode_tile_result(rect, *done.image);
    if (!bytes) co_return bytes.error();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    TaskOutput out;
    out.stdout_data = json{{"tile", work.index}, {"device", done.device}, {"compute_s", seconds}}.dump() + "\n";
    out.files.push_back({{"path", "tile.bin"}, {"data", base64_encode(*bytes)}});
    co_return out;
  }

  Result<std::unique_ptr<ResultChecker>> checker(const json& spec, const json& input) const override {
    auto r = read_spec(spec);
    if (!r) return r.error();
    auto tiles = render::split_tiles(r->settings.width, r->settings.height, r->tile, r->overlap);
    if (!tiles) return tiles.error();
    for (const auto& f : field_or(input, "files", json::array()))
      if (f.is_object() && string_or(f, "path") == kSceneFile) {
        auto text = base64_decode(string_or(f, "data"));
        if (!text) return text.error();
        auto scene = render::parse_scene(*text);
        if (!scene) return scene.error();
        return std::unique_ptr<ResultChecker>(std::make_unique<RenderChecker>(*r, std::move(*tiles), std::move(*scene)));
      }
    return fail(errc::invalid_argument, "render: the job has no scene");
  }

  json verification_method(const json& spec) const override {
    auto r = read_spec(spec);
    return {{"method", "pixel-spot-check"}, {"pixels", check_pixels(r ? r->settings.spp : 16)},
            {"tolerance", render::SpotCheckRules{}.tolerance}};
  }

  std::optional<json> on_accepted(const json& spec, std::int64_t index, const TaskResult& result) const override {
    auto r = read_spec(spec);
    if (!r) return std::nullopt;
    auto tile = tile_of(result);
    if (!tile) return std::nullopt;
    auto png = render::encode_png(tile->pixels.width, tile->pixels.height, tile->pixels.rgb);
    if (!png) return std::nullopt;
    return json{{"event", "tile_done"}, {"tile", index},        {"x", tile->rect.x}, {"y", tile->rect.y},
                {"w", tile->rect.w},    {"h", tile->rect.h},    {"png", base64_encode(*png)}};
  }

  Result<json> merge(const json& spec, std::int64_t tasks, const fs::path& shards, const fs::path& out) const override {
    auto r = read_spec(spec);
    if (!r) return r.error();
    auto tiles = render::split_tiles(r->settings.width, r->settings.height, r->tile, r->overlap);
    if (!tiles) return tiles.error();
    std::vector<render::TileImage> images;
    json devices = json::object();
    for (std::int64_t i = 0; i < tasks; ++i) {
      fs::path dir = shards / ("shard-" + std::to_string(i));
      auto bytes = read_file(dir / "tile.bin", 256ull << 20);
      if (!bytes) return fail(errc::not_found, "tile " + std::to_string(i) + " is missing: " + bytes.error().what());
      auto tile = render::decode_tile_result(*bytes);
      if (!tile) return fail(errc::malformed, "tile " + std::to_string(i) + ": " + tile.error().what());
      if (!(tile->rect == (*tiles)[static_cast<std::size_t>(i)].rendered))
        return fail(errc::malformed, "tile " + std::to_string(i) + " covers the wrong pixels");
      images.push_back({static_cast<int>(i), std::move(tile->pixels)});
      if (auto line = read_file(dir / "stdout", 4096)) {
        auto j = json::parse(*line, nullptr, false);
        if (j.is_object()) {
          const std::string device = string_or(j, "device", "cpu");
          devices[device] = int_or(devices, device.c_str(), 0) + 1;
        }
      }
    }
    auto image = render::stitch(r->settings.width, r->settings.height, r->tile, r->overlap, images);
    if (!image) return image.error();
    auto png = render::encode_png(image->width, image->height, image->rgb);
    if (!png) return png.error();
    fs::path file = out.extension() == ".png" ? out : out / "image.png";
    if (auto w = write_file(file, *png); !w) return w.error();
    return json{{"image", fs::absolute(file).string()}, {"width", image->width}, {"height", image->height},
                {"tiles_by_device", devices}};
  }
};

}  // namespace

std::unique_ptr<Workload> make_render_workload() { return std::make_unique<RenderWorkload>(); }

}  // namespace runsnack::pool
