// libFuzzer: parse_link must never crash on any input, in either spelling
// (link/link.hpp); whatever it accepts must survive format_link -> parse_link
// unchanged, and format_link must write only characters no shell treats
// specially. link_is_unfinished must not crash either, and a link that parses
// is never unfinished.
#include "link/link.hpp"

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  constexpr std::string_view kShellSafe = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._:/,";
  std::string_view text(reinterpret_cast<const char*>(data), size);
  const bool unfinished = runsnack::link_is_unfinished(text);
  auto link = runsnack::parse_link(text);
  if (!link) return 0;
  if (unfinished) std::abort();
  std::string printed = runsnack::format_link(*link);
  if (printed.find_first_not_of(kShellSafe) != std::string::npos) std::abort();
  auto again = runsnack::parse_link(printed);
  if (!again || !(*again == *link) || runsnack::format_link(*again) != printed) std::abort();
  return 0;
}
