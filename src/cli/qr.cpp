#include "cli/qr.hpp"

#include <qrencode.h>

#include <memory>

namespace runsnack::cli {

std::string render_qr(const std::string& text) {
  std::unique_ptr<QRcode, decltype(&QRcode_free)> qr(
      QRcode_encodeString8bit(text.c_str(), 0, QR_ECLEVEL_L), &QRcode_free);
  if (!qr) return {};
  const int n = qr->width;
  const int quiet = 2;
  auto dark = [&](int x, int y) {
    if (x < 0 || y < 0 || x >= n || y >= n) return false;
    return (qr->data[y * n + x] & 1) != 0;
  };
  std::string out;
  // Light background: a module is "on" (printed as a space) when dark, so the
  // code reads correctly on dark terminals too.
  for (int y = -quiet; y < n + quiet; y += 2) {
    for (int x = -quiet; x < n + quiet; ++x) {
      bool top = !dark(x, y), bottom = !dark(x, y + 1);
      if (top && bottom) out += "\u2588";
      else if (top) out += "\u2580";
      else if (bottom) out += "\u2584";
      else out += " ";
    }
    out += "\n";
  }
  return out;
}

}  // namespace runsnack::cli
