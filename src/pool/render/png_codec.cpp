#include "pool/render/png_codec.hpp"

#include <png.h>

#include <cstring>

namespace runsnack::render {

Result<std::string> encode_png(int width, int height, std::span<const std::uint8_t> rgb) {
  if (width < 1 || width > kMaxImageSide || height < 1 || height > kMaxImageSide ||
      rgb.size() != static_cast<std::size_t>(width) * static_cast<std::size_t>(height) * 3)
    return fail(errc::invalid_argument, "png: image size does not match its pixels");
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width);
  image.height = static_cast<png_uint_32>(height);
  image.format = PNG_FORMAT_RGB;
  // First call measures, second writes.
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&image, nullptr, &size, 0, rgb.data(), 0, nullptr))
    return fail(errc::internal, std::string("png: ") + image.message);
  std::string out(size, '\0');
  if (!png_image_write_to_memory(&image, out.data(), &size, 0, rgb.data(), 0, nullptr))
    return fail(errc::internal, std::string("png: ") + image.message);
  out.resize(size);
  return out;
}

Result<RgbImage> decode_png(std::string_view png, int max_side) {
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, png.data(), png.size()))
    return fail(errc::malformed, std::string("png: ") + image.message);
  if (image.width < 1 || image.height < 1 || image.width > static_cast<png_uint_32>(max_side) ||
      image.height > static_cast<png_uint_32>(max_side)) {
    png_image_free(&image);
    return fail(errc::too_large, "png: larger than " + std::to_string(max_side) + " pixels a side");
  }
  image.format = PNG_FORMAT_RGB;
  RgbImage out{static_cast<int>(image.width), static_cast<int>(image.height),
               std::vector<std::uint8_t>(PNG_IMAGE_SIZE(image))};
  // finish_read frees libpng's state whether or not it succeeds.
  if (!png_image_finish_read(&image, nullptr, out.rgb.data(), 0, nullptr))
    return fail(errc::malformed, std::string("png: ") + image.message);
  return out;
}

}  // namespace runsnack::render
