// libFuzzer target: every byte sequence a peer can send before or right after
// authentication goes through the framing and the typed message parsers.
#include "session/auth.hpp"
#include "session/goodbye.hpp"
#include "session/message.hpp"
#include "session/stream_header.hpp"

#include <cstddef>
#include <cstdint>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace runsnack;
  std::span<const std::uint8_t> in(data, size);
  if (in.size() >= kMessagePrefixBytes) {
    auto len = decode_message_length(in.first<kMessagePrefixBytes>());
    (void)len;
  }
  auto body = decode_message_body(in);
  if (!body) return 0;
  (void)parse_auth_hello(*body);
  (void)parse_auth_reply(*body);
  if (auto header = parse_stream_header(*body)) (void)parse_goodbye(*header);
  (void)parse_stream_reply(*body);
  return 0;
}
