#include "pool/render/spot_check.hpp"

#include <cstdlib>

namespace runsnack::render {

Result<SpotCheckOutcome> spot_check(const Scene& scene, const RenderSettings& settings, TileRect rect,
                                    const RgbImage& tile, std::span<const std::pair<int, int>> pixels,
                                    const SpotCheckRules& rules) {
  if (tile.width != rect.w || tile.height != rect.h || tile.rgb.size() != static_cast<std::size_t>(rect.w) * rect.h * 3)
    return fail(errc::invalid_argument, "the tile is not the rectangle's size");
  RenderSettings one = settings;
  one.threads = 1;  // one pixel: no helper threads
  SpotCheckOutcome out;
  for (const auto& [x, y] : pixels) {
    if (x < rect.x || y < rect.y || x >= rect.x + rect.w || y >= rect.y + rect.h)
      return fail(errc::invalid_argument, "a checked pixel lies outside the tile");
    auto mine = render_rect(scene, one, TileRect{x, y, 1, 1});
    if (!mine) return mine.error();
    const std::size_t at = (static_cast<std::size_t>(y - rect.y) * rect.w + (x - rect.x)) * 3;
    bool same = true;
    for (int c = 0; c < 3; ++c) same = same && std::abs(int{mine->rgb[c]} - int{tile.rgb[at + c]}) <= rules.tolerance;
    ++out.checked;
    out.mismatched += !same;
  }
  out.accepted = out.mismatched <= rules.allowed_mismatches;
  if (!out.accepted)
    out.why = std::to_string(out.mismatched) + " of " + std::to_string(out.checked) +
              " pixels checked differ from the coordinator's render by more than " + std::to_string(rules.tolerance) +
              " levels";
  return out;
}

}  // namespace runsnack::render
