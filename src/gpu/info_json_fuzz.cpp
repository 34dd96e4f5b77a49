// libFuzzer target for the parsers of a peer's info reply: any bytes must
// give a value or an error, never a crash, a throw or an unbounded allocation.
#include <cstddef>
#include <cstdint>

#include "gpu/info_json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  (void)runsnack::gpu_report_from_json(j);
  (void)runsnack::host_info_from_json(j);
  (void)runsnack::gpu_info_from_json(j);
  return 0;
}
