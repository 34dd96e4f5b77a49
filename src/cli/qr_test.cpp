// The terminal QR code reads as the code it encodes on any theme: explicit colours on every line,
// dark modules drawn dark, the quiet zone of 4 modules (issue 39, item 10: it was inverted on a
// light theme).
#include "cli/qr.hpp"

#include <gtest/gtest.h>
#include <qrencode.h>

#include <memory>
#include <sstream>
#include <vector>

namespace runsnack::cli {
namespace {

TEST(TerminalQr, DarkModulesOnAnExplicitLightBackgroundWithTheQuietZone) {
  const std::string link = "runsnack:///g/abcdefghij/p/eh7ddx5bksrgcytl7bkai36se4nxx3kl/c/192.0.2.7:7000/k/mfrggzdfmztwq2lknnwg23tpoa";
  std::unique_ptr<QRcode, decltype(&QRcode_free)> qr(QRcode_encodeString8bit(link.c_str(), 0, QR_ECLEVEL_L), &QRcode_free);
  ASSERT_TRUE(qr);
  const int n = qr->width, side = n + 2 * kQrQuietModules;
  // Read the modules back from the half blocks.
  std::vector<std::vector<bool>> seen;
  std::istringstream lines(render_qr(link));
  for (std::string line; std::getline(lines, line);) {
    ASSERT_EQ(line.rfind(kQrLineStart, 0), 0u) << "every line sets its colours";
    ASSERT_GE(line.size(), std::string(kQrLineEnd).size());
    ASSERT_EQ(line.substr(line.size() - std::string(kQrLineEnd).size()), kQrLineEnd);
    const std::string cells = line.substr(std::string(kQrLineStart).size(),
                                          line.size() - std::string(kQrLineStart).size() - std::string(kQrLineEnd).size());
    std::vector<bool> top, bottom;
    for (std::size_t i = 0; i < cells.size();) {
      if (cells[i] == ' ') {
        top.push_back(false), bottom.push_back(false), ++i;
        continue;
      }
      const std::string glyph = cells.substr(i, 3);
      i += 3;
      top.push_back(glyph == "\u2588" || glyph == "\u2580");
      bottom.push_back(glyph == "\u2588" || glyph == "\u2584");
    }
    ASSERT_EQ(static_cast<int>(top.size()), side);
    seen.push_back(top), seen.push_back(bottom);
  }
  ASSERT_GE(static_cast<int>(seen.size()), side);
  for (int y = 0; y < side; ++y)
    for (int x = 0; x < side; ++x) {
      const int qx = x - kQrQuietModules, qy = y - kQrQuietModules;
      const bool dark = qx >= 0 && qy >= 0 && qx < n && qy < n && (qr->data[qy * n + qx] & 1);
      ASSERT_EQ(seen[static_cast<std::size_t>(y)][static_cast<std::size_t>(x)], dark) << x << "," << y;
    }
}

}  // namespace
}  // namespace runsnack::cli
