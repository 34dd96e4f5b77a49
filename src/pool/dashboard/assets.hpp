#pragma once
// The dashboard page's files (src/pool/dashboard/www/), embedded into the
// binary at build time by cmake/EmbedFiles.cmake: no file is read at run time.

#include <span>
#include <string_view>

namespace runsnack::pool::dashboard {

struct Asset {
  std::string_view path;   // "/index.html"
  std::string_view bytes;  // static storage
};

std::span<const Asset> embedded_assets();

}  // namespace runsnack::pool::dashboard
