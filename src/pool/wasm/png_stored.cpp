// png_codec.hpp's encoder without libpng, for the WebAssembly kernels: a PNG
// whose zlib stream holds "stored" (uncompressed) deflate blocks. Any PNG
// decoder reads it (the coordinator's libpng does), and the pixels are the
// same bytes; it is only larger than a compressed one (3 bytes a pixel plus
// one per row). Decoding is never needed in the browser.
#include "pool/render/png_codec.hpp"

#include <algorithm>
#include <array>
#include <cstdint>

namespace runsnack::render {
namespace {

std::uint32_t crc32(std::string_view bytes) {
  static const auto table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t n = 0; n < 256; ++n) {
      std::uint32_t c = n;
      for (int k = 0; k < 8; ++k) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
      t[n] = c;
    }
    return t;
  }();
  std::uint32_t c = 0xffffffffu;
  for (char b : bytes) c = table[(c ^ static_cast<std::uint8_t>(b)) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

void put_be32(std::string& out, std::uint32_t v) {
  for (int i = 3; i >= 0; --i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void chunk(std::string& png, const char* type, std::string_view data) {
  put_be32(png, static_cast<std::uint32_t>(data.size()));
  const std::size_t start = png.size();
  png.append(type, 4);
  png.append(data);
  put_be32(png, crc32(std::string_view(png).substr(start)));
}

}  // namespace

Result<std::string> encode_png(int width, int height, std::span<const std::uint8_t> rgb) {
  if (width < 1 || height < 1 || width > kMaxImageSide || height > kMaxImageSide ||
      rgb.size() != static_cast<std::size_t>(width) * static_cast<std::size_t>(height) * 3)
    return fail(errc::invalid_argument, "png: the pixels do not match the size");
  std::string raw;  // filter byte 0 ("none") and the row's bytes, row by row
  const std::size_t row = static_cast<std::size_t>(width) * 3;
  raw.reserve((row + 1) * static_cast<std::size_t>(height));
  for (int y = 0; y < height; ++y) {
    raw.push_back('\0');
    raw.append(reinterpret_cast<const char*>(rgb.data()) + y * row, row);
  }
  std::string z = {'\x78', '\x01'};  // zlib: deflate, 32 KiB window, no dictionary
  constexpr std::size_t kBlock = 65535;
  for (std::size_t at = 0; at < raw.size(); at += kBlock) {
    const std::size_t n = std::min(kBlock, raw.size() - at);
    z.push_back(at + n >= raw.size() ? '\x01' : '\x00');  // BFINAL, BTYPE 00 (stored)
    z.push_back(static_cast<char>(n & 0xff)), z.push_back(static_cast<char>(n >> 8));
    z.push_back(static_cast<char>(~n & 0xff)), z.push_back(static_cast<char>((~n >> 8) & 0xff));
    z.append(raw, at, n);
  }
  std::uint32_t s1 = 1, s2 = 0;  // Adler-32 of the raw bytes
  for (char b : raw) s1 = (s1 + static_cast<std::uint8_t>(b)) % 65521, s2 = (s2 + s1) % 65521;
  put_be32(z, (s2 << 16) | s1);

  std::string png("\x89PNG\r\n\x1a\n", 8);
  std::string ihdr;
  put_be32(ihdr, static_cast<std::uint32_t>(width));
  put_be32(ihdr, static_cast<std::uint32_t>(height));
  ihdr += std::string("\x08\x02\x00\x00\x00", 5);  // 8-bit, RGB, deflate, adaptive filters, no interlace
  chunk(png, "IHDR", ihdr);
  chunk(png, "IDAT", z);
  chunk(png, "IEND", {});
  return png;
}

Result<RgbImage> decode_png(std::string_view, int) {
  return fail(errc::unsupported, "png: this build encodes only (no decoder in the WebAssembly kernels)");
}

}  // namespace runsnack::render
