#include "pool/render/image.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace runsnack::render {
namespace {

RgbImage gradient(int w, int h) {
  RgbImage img{w, h, std::vector<std::uint8_t>(static_cast<std::size_t>(w) * h * 3)};
  for (std::size_t i = 0; i < img.rgb.size(); ++i) img.rgb[i] = static_cast<std::uint8_t>(40 + i % 170);
  return img;
}

RgbImage with_noise(RgbImage img, int amplitude, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> noise(-amplitude, amplitude);
  for (auto& v : img.rgb) v = static_cast<std::uint8_t>(std::clamp(v + noise(rng), 0, 255));
  return img;
}

TEST(Psnr, IsInfiniteForIdenticalImagesAndFallsWithNoise) {
  RgbImage a = gradient(32, 24);
  auto same = psnr(a, a);
  ASSERT_TRUE(same);
  EXPECT_TRUE(std::isinf(*same));

  auto light = psnr(a, with_noise(a, 2, 1));
  auto heavy = psnr(a, with_noise(a, 30, 1));
  ASSERT_TRUE(light && heavy);
  EXPECT_GT(*light, 40.0);  // +-2 noise: MSE 2, about 45 dB
  EXPECT_LT(*heavy, 30.0);
  EXPECT_LT(*heavy, *light);
}

TEST(Psnr, KnownValue) {
  RgbImage a{1, 1, {0, 0, 0}}, b{1, 1, {255, 255, 255}};
  EXPECT_DOUBLE_EQ(psnr(a, b).value(), 0.0);  // MSE equals the peak squared
  RgbImage c{1, 1, {0, 0, 1}};
  EXPECT_NEAR(psnr(a, c).value(), 10 * std::log10(255.0 * 255.0 * 3), 1e-9);
}

TEST(Psnr, RefusesDifferentSizes) {
  EXPECT_FALSE(psnr(gradient(4, 4), gradient(4, 5)));
  EXPECT_FALSE(psnr(RgbImage{}, RgbImage{}));
}

}  // namespace
}  // namespace runsnack::render
