#include "pool/render/png_codec.hpp"

#include <gtest/gtest.h>

namespace runsnack::render {
namespace {

RgbImage pattern(int w, int h) {
  RgbImage img{w, h, std::vector<std::uint8_t>(static_cast<std::size_t>(w) * h * 3)};
  for (std::size_t i = 0; i < img.rgb.size(); ++i) img.rgb[i] = static_cast<std::uint8_t>(i * 7 + i / 3);
  return img;
}

TEST(Png, RoundTripsExactly) {
  RgbImage img = pattern(37, 11);
  auto png = encode_png(img.width, img.height, img.rgb);
  ASSERT_TRUE(png) << png.error().what();
  EXPECT_EQ(png->substr(1, 3), "PNG");
  auto back = decode_png(*png);
  ASSERT_TRUE(back) << back.error().what();
  EXPECT_EQ(*back, img);
}

TEST(Png, RefusesBadInput) {
  EXPECT_FALSE(encode_png(4, 4, std::vector<std::uint8_t>(47)));
  EXPECT_FALSE(encode_png(0, 4, {}));

  auto garbage = decode_png("not a png at all");
  ASSERT_FALSE(garbage);
  EXPECT_TRUE(garbage.error().is(errc::malformed));

  RgbImage img = pattern(20, 10);
  std::string png = encode_png(img.width, img.height, img.rgb).value();
  auto big = decode_png(png, 16);
  ASSERT_FALSE(big);
  EXPECT_TRUE(big.error().is(errc::too_large));

  auto truncated = decode_png(std::string_view(png).substr(0, png.size() / 2));
  ASSERT_FALSE(truncated);
  EXPECT_TRUE(truncated.error().is(errc::malformed));
}

}  // namespace
}  // namespace runsnack::render
