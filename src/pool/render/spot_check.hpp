#pragma once
// Checking a returned tile without rendering it again (docs/RENDER.md
// "Checking tiles"): a pixel is a pure function of the scene, the settings
// and its position (render.hpp "Determinism"), so re-rendering a few pixels
// the worker could not predict and comparing them shows whether the tile is
// what the tracer makes. A tile that was not rendered (made up, copied from
// elsewhere, rendered with fewer samples or another seed) differs at almost
// every pixel and fails; an honest CPU tile matches exactly, and a GPU tile
// within a level or two (the C library's powf in tone mapping).
//
// The cost is `pixels` of the tile's w x h pixels: 16 of a 144 x 144 tile is
// 0.08% of its samples. What it cannot see: a forger who alters only a few
// pixels (a fraction f is found with probability 1 - (1 - f)^pixels, about,
// before the allowed mismatches). Pure; thread-safe.

#include "core/error.hpp"
#include "pool/render/image.hpp"
#include "pool/render/render.hpp"
#include "pool/render/scene.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <utility>

namespace runsnack::render {

struct SpotCheckRules {
  int tolerance = 2;          // per channel, in 8-bit levels
  int allowed_mismatches = 1;  // checked pixels that may differ by more (a GPU path that went another way)
};

struct SpotCheckOutcome {
  int checked = 0, mismatched = 0;
  bool accepted = false;
  std::string why;  // when not accepted
};

// Renders each of `pixels` (x, y in the whole image, inside `rect`) on the
// CPU and compares it with the same pixel of `tile`, which covers `rect`.
Result<SpotCheckOutcome> spot_check(const Scene& scene, const RenderSettings& settings, TileRect rect,
                                    const RgbImage& tile, std::span<const std::pair<int, int>> pixels,
                                    const SpotCheckRules& rules = {});

}  // namespace runsnack::render
