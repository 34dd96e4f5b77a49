#pragma once
// The framed channel of the run / cp streams (after the stream header):
//
//   0       1               5
//  +-------+---------------+--------------------------------+
//  | type  | length u32 BE | payload: `length` bytes         |
//  +-------+---------------+--------------------------------+
//
//   type 1 control  payload: one JSON object (UTF-8), <= kMaxControlBytes
//   type 2 stdout   payload: raw bytes, <= kMaxDataBytes
//   type 3 stderr   payload: raw bytes, <= kMaxDataBytes
//   type 4 data     payload: file bytes, <= kMaxDataBytes
//   type 5 zdata    payload: one zstd frame of file bytes, compressed <= kMaxDataBytes,
//                   declared content size <= kMaxDataBytes
//   type 6 stdin    payload: raw bytes (shell)
//   type 7 manifest payload: a binary manifest (manifest.hpp), <= kMaxControlBytes
//
// An unknown type, a length over its limit or control text that is not a
// JSON object is errc::malformed / too_large: the stream is closed.

#include "core/error.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace runsnack::fs {

enum class FrameType : std::uint8_t { control = 1, out = 2, err = 3, data = 4, zdata = 5, in = 6, manifest = 7 };

inline constexpr std::size_t kFrameHeaderBytes = 5;
inline constexpr std::uint32_t kMaxDataBytes = 256 * 1024;
inline constexpr std::uint32_t kMaxControlBytes = 32 * 1024 * 1024;  // a manifest of a large tree

struct FrameHeader {
  FrameType type{};
  std::uint32_t length = 0;
};

Result<FrameHeader> decode_frame_header(std::span<const std::uint8_t, kFrameHeaderBytes> bytes);
std::vector<std::uint8_t> encode_frame(FrameType type, std::span<const std::uint8_t> payload);
Result<nlohmann::json> decode_control(std::span<const std::uint8_t> payload);

// zstd: compresses when it saves at least 1/16; otherwise returns nothing.
std::optional<std::vector<std::uint8_t>> maybe_compress(std::span<const std::uint8_t> data);
Result<std::vector<std::uint8_t>> decompress(std::span<const std::uint8_t> payload);

}  // namespace runsnack::fs
