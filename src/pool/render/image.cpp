#include "pool/render/image.hpp"

#include <cmath>
#include <limits>

namespace runsnack::render {

Result<double> psnr(const RgbImage& a, const RgbImage& b) {
  if (a.width != b.width || a.height != b.height || a.rgb.size() != b.rgb.size())
    return fail(errc::invalid_argument, "psnr: the images differ in size");
  if (a.rgb.empty()) return fail(errc::invalid_argument, "psnr: the images are empty");
  double sum = 0;
  for (std::size_t i = 0; i < a.rgb.size(); ++i) {
    double d = static_cast<double>(a.rgb[i]) - static_cast<double>(b.rgb[i]);
    sum += d * d;
  }
  if (sum == 0) return std::numeric_limits<double>::infinity();
  double mse = sum / static_cast<double>(a.rgb.size());
  return 10.0 * std::log10(255.0 * 255.0 / mse);
}

}  // namespace runsnack::render
