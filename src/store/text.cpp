#include "store/text.hpp"

#include <algorithm>

namespace runsnack {
namespace {

// Length of the valid UTF-8 sequence starting at text[i], or 0 if invalid.
std::size_t utf8_sequence_length(std::string_view text, std::size_t i) {
  auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  unsigned char c = byte(i);
  std::size_t n;
  unsigned min;
  unsigned code;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    code = c & 0x1F;
    min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    code = c & 0x0F;
    min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    code = c & 0x07;
    min = 0x10000;
  } else
    return 0;
  if (i + n > text.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i + k) & 0x3F);
  }
  // Overlong forms, surrogates and values past Unicode are invalid.
  if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return n;
}

}  // namespace

std::string bounded_text(std::string_view text, std::size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes));
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t n = utf8_sequence_length(text, i);
    bool control = n == 1 && (static_cast<unsigned char>(text[i]) < 0x20 || text[i] == 0x7F);
    if (n == 0 || control) {
      if (out.size() + 1 > max_bytes) break;
      out += '?';
      i += n == 0 ? 1 : n;
      continue;
    }
    if (out.size() + n > max_bytes) break;
    out.append(text.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace runsnack
