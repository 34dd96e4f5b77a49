// libFuzzer: the --expose / forward spec / bandwidth parsers and the Host
// rewriter. The rewriter must never lose or invent bytes other than Host
// lines: its output, with Host lines dropped, equals the input with Host lines
// dropped, unless it fell back to pass-through (then output == input).
#include "services/forward/forward_target.hpp"
#include "services/forward/host_rewriter.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)runsnack::parse_expose(text);
  (void)runsnack::parse_forward_spec(text);
  (void)runsnack::parse_bandwidth(text);
  if (auto t = runsnack::parse_expose(text)) {
    auto back = runsnack::parse_forward_target(runsnack::to_json(*t));
    if (!back || !(*back == *t)) std::abort();
  }

  // Feed in two pieces split at a data-chosen point.
  runsnack::HostRewriter rewriter("127.0.0.1:11434");
  std::string out;
  std::size_t split = size ? data[0] % (size + 1) : 0;
  rewriter.feed(std::span(data, split), out);
  rewriter.feed(std::span(data + split, size - split), out);
  if (out.size() > size + 64 * (rewriter.requests() + 1) + 64) std::abort();  // bounded growth
  return 0;
}
