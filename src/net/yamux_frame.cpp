#include "net/yamux_frame.hpp"

namespace runsnack::yamux {
namespace {

void put16(std::uint8_t* p, std::uint16_t v) noexcept {
  p[0] = static_cast<std::uint8_t>(v >> 8);
  p[1] = static_cast<std::uint8_t>(v);
}
void put32(std::uint8_t* p, std::uint32_t v) noexcept {
  p[0] = static_cast<std::uint8_t>(v >> 24);
  p[1] = static_cast<std::uint8_t>(v >> 16);
  p[2] = static_cast<std::uint8_t>(v >> 8);
  p[3] = static_cast<std::uint8_t>(v);
}
std::uint16_t get16(const std::uint8_t* p) noexcept {
  return static_cast<std::uint16_t>((p[0] << 8) | p[1]);
}
std::uint32_t get32(const std::uint8_t* p) noexcept {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

}  // namespace

void encode_header(const FrameHeader& h, std::span<std::uint8_t, kHeaderSize> out) noexcept {
  out[0] = kProtocolVersion;
  out[1] = static_cast<std::uint8_t>(h.type);
  put16(&out[2], h.flags);
  put32(&out[4], h.stream_id);
  put32(&out[8], h.length);
}

EncodedHeader encode_header(const FrameHeader& h) noexcept {
  EncodedHeader out;
  encode_header(h, std::span<std::uint8_t, kHeaderSize>(out));
  return out;
}

Result<FrameHeader> decode_header(std::span<const std::uint8_t, kHeaderSize> in) {
  if (in[0] != kProtocolVersion) return fail(errc::malformed, "yamux: unsupported protocol version");
  if (in[1] > static_cast<std::uint8_t>(FrameType::go_away))
    return fail(errc::malformed, "yamux: unknown frame type");
  FrameHeader h;
  h.type = static_cast<FrameType>(in[1]);
  h.flags = get16(&in[2]);
  if ((h.flags & ~flag::all) != 0) return fail(errc::malformed, "yamux: unknown flag bits");
  h.stream_id = get32(&in[4]);
  h.length = get32(&in[8]);
  return h;
}

}  // namespace runsnack::yamux
