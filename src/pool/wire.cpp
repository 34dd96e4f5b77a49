#include "pool/wire.hpp"

#include <openssl/evp.h>

#include <array>
#include <cstdint>
#include <cstring>

namespace runsnack::pool {

std::string frame_header(std::size_t length) {
  const auto n = static_cast<std::uint32_t>(length);
  return {static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8), static_cast<char>(n)};
}

Result<std::uint32_t> frame_length(std::span<const std::uint8_t, kFrameHeaderBytes> h, std::size_t budget) {
  const std::uint32_t n = (std::uint32_t{h[0]} << 24) | (std::uint32_t{h[1]} << 16) | (std::uint32_t{h[2]} << 8) | h[3];
  if (n > budget)
    return fail(errc::too_large, "a frame of " + std::to_string(n) + " bytes is over the " + std::to_string(kMaxFrameBytes) +
                                     " bytes a message's frames may hold");
  return n;
}

Result<std::vector<std::string>> split_frames(std::string_view bytes, std::size_t count, std::size_t budget) {
  std::vector<std::string> frames;
  for (std::size_t i = 0; i < count; ++i) {
    if (bytes.size() < kFrameHeaderBytes) return fail(errc::malformed, "frame " + std::to_string(i) + " is cut short");
    std::array<std::uint8_t, kFrameHeaderBytes> h;
    std::memcpy(h.data(), bytes.data(), h.size());
    auto n = frame_length(h, budget);
    if (!n) return n.error();
    bytes.remove_prefix(kFrameHeaderBytes);
    if (bytes.size() < *n) return fail(errc::malformed, "frame " + std::to_string(i) + " is cut short");
    frames.emplace_back(bytes.substr(0, *n));
    bytes.remove_prefix(*n);
    budget -= *n;
  }
  if (!bytes.empty()) return fail(errc::malformed, "bytes after the last frame");
  return frames;
}

std::string base64_encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

namespace {
// Decoding tables, one per position in a 4-character group, each value
// already shifted into place, so a group is four lookups ORed together; bit
// 24 marks a character outside the alphabet. Results carry megabytes (a
// matmul tile is 4 MiB) and the coordinator decodes them to check them.
struct Base64Tables {
  std::uint32_t at[4][256];
};
constexpr Base64Tables make_base64_tables() {
  Base64Tables t{};
  constexpr std::string_view alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int pos = 0; pos < 4; ++pos) {
    for (auto& v : t.at[pos]) v = 1u << 24;
    for (std::uint32_t i = 0; i < 64; ++i) t.at[pos][static_cast<unsigned char>(alphabet[i])] = i << (6 * (3 - pos));
  }
  return t;
}
constexpr Base64Tables kBase64 = make_base64_tables();
}  // namespace

Result<void> base64_decode_into(std::string_view text, std::span<char> out) {
  if (text.size() % 4 != 0) return fail(errc::malformed, "bad base64 length");
  const std::size_t pad = text.empty() ? 0 : (text.back() == '=') + (text[text.size() - 2] == '=');
  if (out.size() != text.size() / 4 * 3 - pad)
    return fail(errc::malformed, "base64 text holds " + std::to_string(text.size() / 4 * 3 - pad) + " bytes, not " +
                                     std::to_string(out.size()));
  if (text.empty()) return {};
  const std::size_t groups = text.size() / 4 - (pad ? 1 : 0);
  const auto* in = reinterpret_cast<const unsigned char*>(text.data());
  auto* o = reinterpret_cast<unsigned char*>(out.data());
  std::uint32_t bad = 0;
  auto group = [&](const unsigned char* g) {
    const std::uint32_t x = kBase64.at[0][g[0]] | kBase64.at[1][g[1]] | kBase64.at[2][g[2]] | kBase64.at[3][g[3]];
    bad |= x;
    return x;
  };
  // Each group's 3 bytes as one 4-byte store (the 4th is overwritten by the
  // next group); the last group, with no byte after it, byte by byte.
  for (std::size_t g = 0; g + 1 < groups; ++g, in += 4, o += 3) {
    const std::uint32_t v = __builtin_bswap32(group(in) << 8);
    std::memcpy(o, &v, 4);
  }
  if (groups > 0) {
    const std::uint32_t x = group(in);
    o[0] = static_cast<unsigned char>(x >> 16), o[1] = static_cast<unsigned char>(x >> 8), o[2] = static_cast<unsigned char>(x);
    in += 4, o += 3;
  }
  if (pad) {  // the last group: "xx==" is one byte, "xxx=" two
    std::uint32_t x = kBase64.at[0][in[0]] | kBase64.at[1][in[1]];
    if (pad == 1) x |= kBase64.at[2][in[2]];
    else if (in[2] != '=') x |= 1u << 24;
    bad |= x;
    o[0] = static_cast<unsigned char>(x >> 16);
    if (pad == 1) o[1] = static_cast<unsigned char>(x >> 8);
  }
  if (bad & (1u << 24)) return fail(errc::malformed, "bad base64");
  return {};
}

Result<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return fail(errc::malformed, "bad base64 length");
  const std::size_t pad = text.empty() ? 0 : (text.back() == '=') + (text[text.size() - 2] == '=');
  std::string out(text.size() / 4 * 3 - pad, '\0');
  if (auto r = base64_decode_into(text, out); !r) return r.error();
  return out;
}

std::string hex_encode(std::string_view bytes) {
  static const char* d = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) out += d[b >> 4], out += d[b & 15];
  return out;
}

Result<std::string> hex_decode(std::string_view text) {
  if (text.size() % 2) return fail(errc::malformed, "bad hex length");
  auto val = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string out;
  for (std::size_t i = 0; i < text.size(); i += 2) {
    int hi = val(text[i]), lo = val(text[i + 1]);
    if (hi < 0 || lo < 0) return fail(errc::malformed, "bad hex");
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

}  // namespace runsnack::pool

namespace runsnack::pool {

std::string valid_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  std::size_t i = 0;
  while (i < bytes.size()) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    bool ok = n > 0 && i + n <= bytes.size();
    for (std::size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(bytes[i + k]) >> 6) == 0x2;
    if (ok && n > 1) {  // no overlong forms, surrogates or code points past U+10FFFF
      std::uint32_t cp = c & (0x7f >> n);
      for (std::size_t k = 1; k < n; ++k) cp = cp << 6 | (static_cast<unsigned char>(bytes[i + k]) & 0x3f);
      ok = cp >= (n == 2 ? 0x80u : n == 3 ? 0x800u : 0x10000u) && cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff);
    }
    if (ok) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      out += "\xef\xbf\xbd";  // U+FFFD
      ++i;
    }
  }
  return out;
}

}  // namespace runsnack::pool
