// libFuzzer target for a worker's tile result (tile_wire.hpp) and the PNG
// inside it: any bytes must decode or fail cleanly within the size bounds.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "pool/render/tile_wire.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto tile =
      runsnack::render::decode_tile_result(std::string_view(reinterpret_cast<const char*>(data), size));
  if (tile && tile->pixels.rgb.size() != static_cast<std::size_t>(tile->rect.w) * tile->rect.h * 3)
    __builtin_trap();
  return 0;
}
