// libFuzzer target for the scene parser: any bytes must give a scene or a
// one-line error, never a crash, a throw or an unbounded allocation.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "pool/render/scene_parser.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto scene = runsnack::render::parse_scene(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!scene && scene.error().message.find('\n') != std::string::npos) __builtin_trap();
  return 0;
}
