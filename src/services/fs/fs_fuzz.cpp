// libFuzzer target for what the sync reads from a peer: frame headers,
// control frames, manifests (runsnack_fuzzer; scripts/run-fuzzers).
#include "services/fs/frame.hpp"
#include "services/fs/manifest.hpp"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace runsnack::fs;
  if (size >= kFrameHeaderBytes) {
    std::span<const std::uint8_t, kFrameHeaderBytes> head(data, kFrameHeaderBytes);
    (void)decode_frame_header(head);
  }
  std::span<const std::uint8_t> all(data, size);
  (void)decode_control(all);
  (void)parse_manifest(all);
  (void)decompress(all);
  return 0;
}
