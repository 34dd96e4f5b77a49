#include "pool/render/tile_wire.hpp"

#include <gtest/gtest.h>

namespace runsnack::render {
namespace {

RgbImage pattern(int w, int h) {
  RgbImage img{w, h, std::vector<std::uint8_t>(static_cast<std::size_t>(w) * h * 3)};
  for (std::size_t i = 0; i < img.rgb.size(); ++i) img.rgb[i] = static_cast<std::uint8_t>(i % 251);
  return img;
}

TEST(TileWire, RoundTripsAndHasTheDocumentedHeader) {
  RgbImage px = pattern(24, 20);
  TileRect rect{120, 248, 24, 20};
  auto bytes = encode_tile_result(rect, px);
  ASSERT_TRUE(bytes) << bytes.error().what();
  const std::string header(
      "RSTL\x01\x01\x00\x00"
      "\x78\x00\x00\x00"
      "\xf8\x00\x00\x00"
      "\x18\x00\x00\x00"
      "\x14\x00\x00\x00",
      24);
  EXPECT_EQ(bytes->substr(0, 24), header);
  std::uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= std::uint32_t{static_cast<std::uint8_t>((*bytes)[24 + i])} << (8 * i);
  EXPECT_EQ(n, bytes->size() - kTileWireHeaderBytes);
  EXPECT_EQ(bytes->substr(29, 3), "PNG");

  auto back = decode_tile_result(*bytes);
  ASSERT_TRUE(back) << back.error().what();
  EXPECT_EQ(back->rect, rect);
  EXPECT_EQ(back->pixels, px);
}

TEST(TileWire, RefusesEncodingMismatchedPixels) {
  EXPECT_FALSE(encode_tile_result(TileRect{0, 0, 10, 10}, pattern(10, 9)));
  EXPECT_FALSE(encode_tile_result(TileRect{-1, 0, 10, 10}, pattern(10, 10)));
}

TEST(TileWire, RefusesBadBytes) {
  std::string good = encode_tile_result(TileRect{16, 32, 12, 8}, pattern(12, 8)).value();
  auto expect = [](std::string bytes, errc code, const char* what) {
    auto r = decode_tile_result(bytes);
    ASSERT_FALSE(r) << what;
    EXPECT_TRUE(r.error().is(code)) << what << ": " << r.error().what();
  };
  expect(good.substr(0, 27), errc::malformed, "short header");
  expect(good.substr(0, good.size() - 1), errc::malformed, "truncated PNG");
  expect(good + "x", errc::malformed, "trailing byte");
  std::string magic = good;
  magic[0] = 'X';
  expect(magic, errc::malformed, "magic");
  std::string version = good;
  version[4] = 2;
  expect(version, errc::unsupported, "version");
  std::string reserved = good;
  reserved[7] = 1;
  expect(reserved, errc::malformed, "reserved");
  std::string wide = good;
  wide[17] = 0x10;  // w = 4096 + 12
  expect(wide, errc::too_large, "width");
  std::string zero = good;
  zero[20] = 0;  // h = 0
  expect(zero, errc::malformed, "height");
  std::string other_size = good;
  other_size[16] = 11;  // the header says 11 wide, the PNG is 12
  expect(other_size, errc::malformed, "size mismatch");
  std::string huge_length = good;
  huge_length[27] = 0x7f;
  expect(huge_length, errc::too_large, "length");
  std::string corrupt = good;
  corrupt[kTileWireHeaderBytes + (good.size() - kTileWireHeaderBytes) / 2] ^= 0x55;
  expect(corrupt, errc::malformed, "corrupt PNG");
}

}  // namespace
}  // namespace runsnack::render
