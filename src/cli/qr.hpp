#pragma once
// A QR code of a link for a terminal, drawn with Unicode half blocks (two
// modules per character cell), dark on light with a quiet zone.

#include <string>

namespace runsnack::cli {

// Empty when the text does not fit a QR code.
std::string render_qr(const std::string& text);

}  // namespace runsnack::cli
