#include "cli/text_column.hpp"

namespace runsnack::cli {

std::string column(const std::string& text, std::size_t width) {
  std::string out;
  std::size_t cols = 0;
  for (std::size_t i = 0; i < text.size();) {
    std::size_t len = 1;
    auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0xF0) len = 4; else if (c >= 0xE0) len = 3; else if (c >= 0xC0) len = 2;
    if (cols + 1 >= width && i + len < text.size()) {
      out += "…";
      ++cols;
      break;
    }
    out += text.substr(i, len);
    ++cols;
    i += len;
  }
  return out + std::string(width > cols ? width - cols : 1, ' ');
}

}  // namespace runsnack::cli
