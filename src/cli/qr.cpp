#include "cli/qr.hpp"

#include <qrencode.h>

#include <memory>

namespace runsnack::cli {

std::string render_qr(const std::string& text) {
  std::unique_ptr<QRcode, decltype(&QRcode_free)> qr(
      QRcode_encodeString8bit(text.c_str(), 0, QR_ECLEVEL_L), &QRcode_free);
  if (!qr) return {};
  const int n = qr->width;
  auto dark = [&](int x, int y) {
    if (x < 0 || y < 0 || x >= n || y >= n) return false;
    return (qr->data[y * n + x] & 1) != 0;
  };
  std::string out;
  // Dark modules in the foreground colour, each line on an explicit black-on-white (so a light
  // terminal theme does not invert the code, which many phone scanners then refuse to read).
  for (int y = -kQrQuietModules; y < n + kQrQuietModules; y += 2) {
    out += kQrLineStart;
    for (int x = -kQrQuietModules; x < n + kQrQuietModules; ++x) {
      const bool top = dark(x, y), bottom = dark(x, y + 1);
      if (top && bottom) out += "\u2588";
      else if (top) out += "\u2580";
      else if (bottom) out += "\u2584";
      else out += " ";
    }
    out += kQrLineEnd;
    out += "\n";
  }
  return out;
}

}  // namespace runsnack::cli
