// libFuzzer target: the rendezvous message decoder (rdv_codec.hpp) on
// arbitrary bytes, including the length prefix. A decoded message must
// re-encode and decode to the same JSON.
#include "signaling/rdv_codec.hpp"
#include "session/message.hpp"

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace runsnack;
  if (size < kMessagePrefixBytes) return 0;
  auto len = decode_message_length(std::span<const std::uint8_t, kMessagePrefixBytes>(data, kMessagePrefixBytes),
                                   rdv::kMaxRdvMessageBytes);
  if (!len) return 0;
  std::span<const std::uint8_t> body(data + kMessagePrefixBytes, size - kMessagePrefixBytes);
  if (body.size() > *len) body = body.first(*len);
  auto m = rdv::decode(body);
  if (!m) return 0;
  std::string again = rdv::encode(*m);
  auto back = rdv::decode(std::span<const std::uint8_t>(
      reinterpret_cast<const std::uint8_t*>(again.data()) + kMessagePrefixBytes, again.size() - kMessagePrefixBytes));
  if (!back || rdv::to_json(*back) != rdv::to_json(*m)) std::abort();
  return 0;
}
