// libFuzzer target for the binary manifest a peer sends (manifest.hpp):
// whatever parses must encode back to the same bytes, and every symlink it
// accepts has a target within the format's bounds (seeds: fuzz/seeds/manifest_fuzz).
#include "fs/manifest.hpp"
#include "fs/path_rules.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace runsnack::fs;
  const std::span<const std::uint8_t> wire(data, size);
  if (auto entries = parse_manifest(wire)) {
    if (encode_manifest(*entries) != std::vector<std::uint8_t>(data, data + size)) std::abort();
    for (const auto& e : *entries)
      if (e.type == EntryType::link &&
          (e.target.empty() || e.target.size() > kMaxPathBytes || e.target.find('\0') != std::string::npos))
        std::abort();
  }
  return 0;
}
