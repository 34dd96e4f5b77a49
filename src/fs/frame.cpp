#include "fs/frame.hpp"

#include <zstd.h>

#include <memory>
#include <optional>

namespace runsnack::fs {

Result<FrameHeader> decode_frame_header(std::span<const std::uint8_t, kFrameHeaderBytes> b) {
  FrameHeader h;
  if (b[0] < 1 || b[0] > 7) return fail(errc::malformed, "unknown frame type " + std::to_string(b[0]));
  h.type = static_cast<FrameType>(b[0]);
  h.length = (std::uint32_t(b[1]) << 24) | (std::uint32_t(b[2]) << 16) | (std::uint32_t(b[3]) << 8) | b[4];
  const bool big = h.type == FrameType::control || h.type == FrameType::manifest;
  std::uint32_t max = big ? kMaxControlBytes : kMaxDataBytes;
  if (h.length > max) return fail(errc::too_large, "frame of " + std::to_string(h.length) + " bytes is over the limit");
  return h;
}

std::vector<std::uint8_t> encode_frame(FrameType type, std::span<const std::uint8_t> payload) {
  std::vector<std::uint8_t> out(kFrameHeaderBytes + payload.size());
  auto n = static_cast<std::uint32_t>(payload.size());
  out[0] = static_cast<std::uint8_t>(type);
  out[1] = std::uint8_t(n >> 24), out[2] = std::uint8_t(n >> 16), out[3] = std::uint8_t(n >> 8), out[4] = std::uint8_t(n);
  std::copy(payload.begin(), payload.end(), out.begin() + kFrameHeaderBytes);
  return out;
}

Result<nlohmann::json> decode_control(std::span<const std::uint8_t> payload) {
  auto j = nlohmann::json::parse(payload.begin(), payload.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return fail(errc::malformed, "control frame is not a JSON object");
  if (!j.contains("type") || !j["type"].is_string()) return fail(errc::malformed, "control frame has no type");
  return j;
}

std::optional<std::vector<std::uint8_t>> maybe_compress(std::span<const std::uint8_t> data) {
  if (data.size() < 512) return std::nullopt;
  // One context per thread: creating one per call costs more than compressing a small chunk.
  static thread_local std::unique_ptr<ZSTD_CCtx, decltype(&ZSTD_freeCCtx)> ctx(ZSTD_createCCtx(), ZSTD_freeCCtx);
  if (!ctx) return std::nullopt;
  std::vector<std::uint8_t> out(ZSTD_compressBound(data.size()));
  std::size_t n = ZSTD_compressCCtx(ctx.get(), out.data(), out.size(), data.data(), data.size(), 1);
  if (ZSTD_isError(n) || n + data.size() / 16 >= data.size()) return std::nullopt;
  out.resize(n);
  return out;
}

Result<std::vector<std::uint8_t>> decompress(std::span<const std::uint8_t> payload) {
  unsigned long long size = ZSTD_getFrameContentSize(payload.data(), payload.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN || size > kMaxDataBytes)
    return fail(errc::malformed, "bad compressed frame");
  static thread_local std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> ctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  if (!ctx) return fail(errc::io_error, "zstd: no memory");
  std::vector<std::uint8_t> out(size);
  std::size_t n = ZSTD_decompressDCtx(ctx.get(), out.data(), out.size(), payload.data(), payload.size());
  if (ZSTD_isError(n) || n != size) return fail(errc::malformed, "bad compressed frame");
  return out;
}

}  // namespace runsnack::fs
