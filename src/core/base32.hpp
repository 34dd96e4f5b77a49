#pragma once
// RFC 4648 base32, lowercase, no padding: the alphabet of PeerIds, grant ids
// and link secrets (case-insensitive to read, safe in URLs and file names).

#include "core/error.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace runsnack::base32 {

std::string encode(std::span<const std::uint8_t> bytes);
// Strict: only [a-z2-7] (upper case accepted), no padding, and the unused
// trailing bits must be zero so every value has exactly one spelling.
Result<std::vector<std::uint8_t>> decode(std::string_view text);
bool is_alphabet(std::string_view text) noexcept;

}  // namespace runsnack::base32
