// libFuzzer: weights files come from every worker of a training job (its
// script's output) and from the submitting user, and the coordinator parses
// them. parse_weights must never crash or over-read, and whatever it accepts
// must encode and parse back to the same weights, the same bytes a second time.
#include <string_view>

#include "pool/training/weights.hpp"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, std::size_t size) {
  using namespace runsnack::pool::training;
  // A small data bound so the fuzzer explores headers rather than big allocations.
  constexpr std::uint64_t kFuzzMaxData = 1 << 16;
  auto weights = parse_weights({reinterpret_cast<const char*>(data), size}, kFuzzMaxData);
  if (!weights) return 0;
  for (const auto& [name, t] : weights->tensors)
    if (static_cast<std::int64_t>(t.values.size()) != element_count(t.shape, kFuzzMaxData)) __builtin_trap();
  auto bytes = encode_weights(*weights, kFuzzMaxData);
  // Offsets are renumbered in name order, so a header at the 1 MiB bound may grow by a few digits.
  if (!bytes && bytes.error().is(runsnack::errc::too_large)) return 0;
  if (!bytes) __builtin_trap();
  auto again = parse_weights(*bytes, kFuzzMaxData);
  // NaN payloads compare unequal; compare the bytes they encode to instead.
  if (!again || again->tensors.size() != weights->tensors.size() || again->metadata != weights->metadata)
    __builtin_trap();
  auto bytes_again = encode_weights(*again, kFuzzMaxData);
  if (!bytes_again || *bytes_again != *bytes) __builtin_trap();
  return 0;
}
