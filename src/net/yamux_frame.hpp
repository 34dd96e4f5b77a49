#pragma once
// yamux frame header codec (HashiCorp yamux spec, "Framing"). Pure: no I/O.
//
//   0               1               2               3
//   0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7
//  +---------------+---------------+-------------------------------+
//  |  version = 0  |     type      |            flags              |
//  +---------------+---------------+-------------------------------+
//  |                          stream id                            |
//  +---------------------------------------------------------------+
//  |                            length                             |
//  +---------------------------------------------------------------+
//  all fields big-endian; 12 bytes; a Data frame is followed by `length`
//  payload bytes, every other type carries no payload.
//
//  type:   0 Data          length = payload bytes
//          1 WindowUpdate  length = send-window increment
//          2 Ping          length = opaque ping id, stream id 0
//          3 GoAway        length = GoAwayCode, stream id 0
//  flags:  SYN=1 (open stream / ping request)  ACK=2 (accept / ping reply)
//          FIN=4 (half-close)                 RST=8 (reset)

#include "core/error.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace runsnack::yamux {

inline constexpr std::size_t kHeaderSize = 12;
inline constexpr std::uint8_t kProtocolVersion = 0;

enum class FrameType : std::uint8_t { data = 0, window_update = 1, ping = 2, go_away = 3 };

namespace flag {
inline constexpr std::uint16_t syn = 1;
inline constexpr std::uint16_t ack = 2;
inline constexpr std::uint16_t fin = 4;
inline constexpr std::uint16_t rst = 8;
inline constexpr std::uint16_t all = syn | ack | fin | rst;
}  // namespace flag

enum class GoAwayCode : std::uint32_t { normal = 0, protocol_error = 1, internal_error = 2 };

struct FrameHeader {
  FrameType type = FrameType::data;
  std::uint16_t flags = 0;
  std::uint32_t stream_id = 0;
  std::uint32_t length = 0;

  bool has(std::uint16_t f) const noexcept { return (flags & f) == f; }
  friend bool operator==(const FrameHeader&, const FrameHeader&) = default;
};

using EncodedHeader = std::array<std::uint8_t, kHeaderSize>;

void encode_header(const FrameHeader& h, std::span<std::uint8_t, kHeaderSize> out) noexcept;
EncodedHeader encode_header(const FrameHeader& h) noexcept;

// Fails with errc::malformed on a version other than 0, an unknown type or an
// unknown flag bit. Does not check per-type rules (stream id 0 for Ping);
// that is the state machine's job.
Result<FrameHeader> decode_header(std::span<const std::uint8_t, kHeaderSize> in);

}  // namespace runsnack::yamux
