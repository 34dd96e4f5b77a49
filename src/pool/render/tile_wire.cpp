#include "pool/render/tile_wire.hpp"

#include <cstdint>

#include "pool/render/png_codec.hpp"

namespace runsnack::render {
namespace {

constexpr char kMagic[4] = {'R', 'S', 'T', 'L'};
constexpr std::uint8_t kVersion = 1;
constexpr std::uint8_t kEncodingPng = 1;

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint32_t get_u32(std::string_view in, std::size_t at) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= std::uint32_t{static_cast<std::uint8_t>(in[at + i])} << (8 * i);
  return v;
}

}  // namespace

Result<std::string> encode_tile_result(TileRect rect, const RgbImage& pixels) {
  if (rect.x < 0 || rect.y < 0 || rect.w < 1 || rect.h < 1 || rect.w > kMaxWireTileSide ||
      rect.h > kMaxWireTileSide || pixels.width != rect.w || pixels.height != rect.h)
    return fail(errc::invalid_argument, "tile: pixels do not match the rect or the rect is out of bounds");
  auto png = encode_png(pixels.width, pixels.height, pixels.rgb);
  if (!png) return png.error();
  std::string out(kMagic, sizeof kMagic);
  out.push_back(static_cast<char>(kVersion));
  out.push_back(static_cast<char>(kEncodingPng));
  out.append(2, '\0');
  put_u32(out, static_cast<std::uint32_t>(rect.x));
  put_u32(out, static_cast<std::uint32_t>(rect.y));
  put_u32(out, static_cast<std::uint32_t>(rect.w));
  put_u32(out, static_cast<std::uint32_t>(rect.h));
  put_u32(out, static_cast<std::uint32_t>(png->size()));
  out += *png;
  return out;
}

Result<TileResult> decode_tile_result(std::string_view bytes) {
  if (bytes.size() < kTileWireHeaderBytes) return fail(errc::malformed, "tile: shorter than its header");
  if (bytes.substr(0, 4) != std::string_view(kMagic, 4)) return fail(errc::malformed, "tile: bad magic");
  if (static_cast<std::uint8_t>(bytes[4]) != kVersion || static_cast<std::uint8_t>(bytes[5]) != kEncodingPng)
    return fail(errc::unsupported, "tile: unknown version or pixel encoding");
  if (bytes[6] != 0 || bytes[7] != 0) return fail(errc::malformed, "tile: reserved bytes are not zero");
  std::uint32_t x = get_u32(bytes, 8), y = get_u32(bytes, 12), w = get_u32(bytes, 16), h = get_u32(bytes, 20);
  std::uint32_t n = get_u32(bytes, 24);
  if (x > static_cast<std::uint32_t>(kMaxImageSide) || y > static_cast<std::uint32_t>(kMaxImageSide))
    return fail(errc::malformed, "tile: rect outside any image");
  if (w < 1 || h < 1) return fail(errc::malformed, "tile: empty rect");
  if (w > static_cast<std::uint32_t>(kMaxWireTileSide) || h > static_cast<std::uint32_t>(kMaxWireTileSide))
    return fail(errc::too_large, "tile: sides must be in [1, " + std::to_string(kMaxWireTileSide) + "]");
  if (n > kMaxWireTileBytes) return fail(errc::too_large, "tile: PNG larger than its limit");
  if (bytes.size() - kTileWireHeaderBytes != n)
    return fail(errc::malformed, "tile: PNG length does not match the bytes received");
  auto pixels = decode_png(bytes.substr(kTileWireHeaderBytes), kMaxWireTileSide);
  if (!pixels) return pixels.error();
  if (pixels->width != static_cast<int>(w) || pixels->height != static_cast<int>(h))
    return fail(errc::malformed, "tile: PNG size does not match the header");
  TileResult result;
  result.rect = TileRect{static_cast<int>(x), static_cast<int>(y), static_cast<int>(w), static_cast<int>(h)};
  result.pixels = std::move(*pixels);
  return result;
}

}  // namespace runsnack::render
