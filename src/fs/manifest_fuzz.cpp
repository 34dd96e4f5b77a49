// libFuzzer target for the binary manifest a peer sends (manifest.hpp):
// whatever parses must encode back to the same bytes.
#include "fs/manifest.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace runsnack::fs;
  const std::span<const std::uint8_t> wire(data, size);
  if (auto entries = parse_manifest(wire)) {
    if (encode_manifest(*entries) != std::vector<std::uint8_t>(data, data + size)) std::abort();
  }
  return 0;
}
