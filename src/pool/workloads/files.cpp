#include "pool/wire.hpp"
#include "pool/workloads/builtin.hpp"

#include <fstream>
#include <sstream>

namespace runsnack::pool {

namespace fs = std::filesystem;

Result<nlohmann::json> read_input_dir(const std::string& dir, std::size_t limit) {
  nlohmann::json files = nlohmann::json::array();
  if (dir.empty()) return nlohmann::json{{"files", files}};
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return fail(errc::invalid_argument, "--input " + dir + " is not a folder");
  std::size_t total = 0;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    auto data = read_file(it->path(), limit - std::min(total, limit));
    if (!data) return fail(errc::too_large, "--input is over " + std::to_string(limit >> 20) + " MiB");
    total += data->size();
    files.push_back({{"path", fs::relative(it->path(), dir).string()}, {"data", base64_encode(*data)}});
  }
  if (ec) return fail(errc::io_error, "cannot read " + dir + ": " + ec.message());
  return nlohmann::json{{"files", files}};
}

Result<void> write_file(const fs::path& path, std::string_view data) {
  std::error_code ec;
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  if (!out) return fail(errc::io_error, "cannot write " + path.string() + " (disk full or no permission?)");
  return {};
}

Result<std::string> read_file(const fs::path& path, std::size_t limit) {
  std::error_code ec;
  auto size = fs::file_size(path, ec);
  if (ec) return fail(errc::not_found, "cannot read " + path.string() + ": " + ec.message());
  if (size > limit) return fail(errc::too_large, path.string() + " is over " + std::to_string(limit) + " bytes");
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (!in && !in.eof()) return fail(errc::io_error, "cannot read " + path.string());
  return ss.str();
}

}  // namespace runsnack::pool
