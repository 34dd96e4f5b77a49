#pragma once
// 8-bit RGB images to and from PNG files in memory (libpng's simplified API).
// decode_png reads untrusted bytes: the size in the header is checked
// against `max_side` before any pixel memory is allocated, any other colour
// type is converted to 8-bit RGB, and every failure is a value, not a throw.

#include <span>
#include <string>
#include <string_view>

#include "core/error.hpp"
#include "pool/render/image.hpp"
#include "pool/render/render.hpp"

namespace runsnack::render {

// `invalid_argument` unless width, height are in [1, kMaxImageSide] and
// rgb.size() == width * height * 3; `internal` if libpng fails.
Result<std::string> encode_png(int width, int height, std::span<const std::uint8_t> rgb);

// `malformed` for anything libpng rejects, `too_large` if a side exceeds max_side.
Result<RgbImage> decode_png(std::string_view png, int max_side = kMaxImageSide);

}  // namespace runsnack::render
