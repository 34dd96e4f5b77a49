#pragma once
// A QR code of a link for a terminal, drawn with Unicode half blocks (two
// modules per character cell): black modules on an explicit white background,
// whatever the terminal's theme, with the standard quiet zone of 4 modules.

#include <string>

namespace runsnack::cli {

inline constexpr int kQrQuietModules = 4;
inline constexpr const char* kQrLineStart = "\033[30;107m";  // black on bright white
inline constexpr const char* kQrLineEnd = "\033[0m";

// Empty when the text does not fit a QR code.
std::string render_qr(const std::string& text);

}  // namespace runsnack::cli
