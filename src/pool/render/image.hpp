#pragma once
// An 8-bit RGB image, the unit that renders, tiles, PNG files and the tile
// wire format exchange, and the PSNR that compares two of them.

#include <cstdint>
#include <vector>

#include "core/error.hpp"

namespace runsnack::render {

// Row-major, top row first, 3 bytes (R, G, B) per pixel, no padding:
// rgb.size() == width * height * 3.
struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<std::uint8_t> rgb;

  bool operator==(const RgbImage&) const = default;
};

// Peak signal-to-noise ratio in dB over all channels (peak 255):
// +infinity for identical images. `invalid_argument` if the sizes differ
// or the images are empty.
Result<double> psnr(const RgbImage& a, const RgbImage& b);

}  // namespace runsnack::render
