// libFuzzer: parse_link must never crash on any input, and whatever it
// accepts must survive format_link -> parse_link unchanged.
#include "link/link.hpp"

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto link = runsnack::parse_link(text);
  if (!link) return 0;
  std::string printed = runsnack::format_link(*link);
  auto again = runsnack::parse_link(printed);
  if (!again || !(*again == *link) || runsnack::format_link(*again) != printed) std::abort();
  return 0;
}
