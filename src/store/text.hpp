#pragma once
// Bounding text that came from a peer before it is stored or logged.

#include <cstddef>
#include <string>
#include <string_view>

namespace runsnack {

// `text` cut to at most `max_bytes` bytes, never inside a UTF-8 sequence,
// with each byte that is not valid UTF-8 and each ASCII control character
// (newlines included) replaced by '?', so the result is valid UTF-8 that JSON
// serialization accepts and one line that a terminal shows safely.
std::string bounded_text(std::string_view text, std::size_t max_bytes);

}  // namespace runsnack
