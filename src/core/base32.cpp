#include "core/base32.hpp"

namespace runsnack::base32 {
namespace {
constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz234567";

int value_of(char c) noexcept {
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= '2' && c <= '7') return c - '2' + 26;
  return -1;
}
}  // namespace

std::string encode(std::span<const std::uint8_t> bytes) {
  std::string out;
  out.reserve((bytes.size() * 8 + 4) / 5);
  std::uint32_t buffer = 0;
  int bits = 0;
  for (std::uint8_t b : bytes) {
    buffer = (buffer << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out.push_back(kAlphabet[(buffer >> (bits - 5)) & 31]);
      bits -= 5;
    }
  }
  if (bits > 0) out.push_back(kAlphabet[(buffer << (5 - bits)) & 31]);
  return out;
}

bool is_alphabet(std::string_view text) noexcept {
  for (char c : text)
    if (value_of(c) < 0) return false;
  return true;
}

Result<std::vector<std::uint8_t>> decode(std::string_view text) {
  std::vector<std::uint8_t> out;
  out.reserve(text.size() * 5 / 8);
  std::uint32_t buffer = 0;
  int bits = 0;
  for (char c : text) {
    int v = value_of(c);
    if (v < 0) return fail(errc::malformed, std::string("invalid base32 character '") + c + "'");
    buffer = (buffer << 5) | static_cast<std::uint32_t>(v);
    bits += 5;
    if (bits >= 8) {
      out.push_back(static_cast<std::uint8_t>(buffer >> (bits - 8)));
      bits -= 8;
    }
  }
  // Leftover bits are padding: more than 4 means a truncated character group,
  // non-zero means a second spelling of the same bytes.
  if (bits >= 5 || (buffer & ((1u << bits) - 1)) != 0)
    return fail(errc::malformed, "base32 text has a truncated or non-canonical ending");
  return out;
}

}  // namespace runsnack::base32
