#pragma once
// Fixed-width columns for the tables commands print (links, pool jobs).

#include <cstddef>
#include <string>

namespace runsnack::cli {

// Pads `text` to `width` display columns (UTF-8 aware), cutting it with "…"
// when longer; at least one space follows it.
std::string column(const std::string& text, std::size_t width);

}  // namespace runsnack::cli
