#include "services/fs/manifest.hpp"

#include "services/fs/path_rules.hpp"

#include <set>

namespace runsnack::fs {

nlohmann::json manifest_json(const std::vector<Entry>& entries) {
  nlohmann::json files = nlohmann::json::array();
  for (const auto& e : entries) {
    if (e.type == EntryType::file)
      files.push_back({{"p", e.path}, {"t", "f"}, {"s", e.size}, {"x", e.executable}, {"h", e.sha256}});
    else if (e.type == EntryType::dir)
      files.push_back({{"p", e.path}, {"t", "d"}});
    else
      files.push_back({{"p", e.path}, {"t", "l"}, {"l", e.target}});
  }
  return files;
}

namespace {

bool is_hex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

Result<std::vector<Entry>> parse_manifest(const nlohmann::json& files) {
  if (!files.is_array()) return fail(errc::malformed, "manifest: files is not an array");
  if (files.size() > kMaxManifestEntries) return fail(errc::too_large, "manifest: too many entries");
  std::vector<Entry> out;
  std::set<std::string> seen;
  out.reserve(files.size());
  for (const auto& f : files) {
    if (!f.is_object() || !f.contains("p") || !f["p"].is_string() || !f.contains("t") || !f["t"].is_string())
      return fail(errc::malformed, "manifest: bad entry");
    Entry e;
    e.path = f["p"].get<std::string>();
    if (auto parts = split_relative_path(e.path); !parts) return parts.error();
    if (!seen.insert(e.path).second) return fail(errc::malformed, "manifest: duplicate path " + e.path);
    const std::string t = f["t"].get<std::string>();
    if (t == "f") {
      e.type = EntryType::file;
      if (!f.contains("s") || !f["s"].is_number_unsigned() || !f.contains("h") || !f["h"].is_string())
        return fail(errc::malformed, "manifest: bad file entry " + e.path);
      e.size = f["s"].get<std::uint64_t>();
      if (e.size > kMaxFileBytes) return fail(errc::too_large, "manifest: file too large " + e.path);
      e.sha256 = f["h"].get<std::string>();
      if (!is_hex64(e.sha256)) return fail(errc::malformed, "manifest: bad hash for " + e.path);
      e.executable = f.contains("x") && f["x"].is_boolean() && f["x"].get<bool>();
    } else if (t == "d") {
      e.type = EntryType::dir;
    } else if (t == "l") {
      e.type = EntryType::link;
      if (!f.contains("l") || !f["l"].is_string()) return fail(errc::malformed, "manifest: bad link " + e.path);
      e.target = f["l"].get<std::string>();
      if (!symlink_stays_inside(e.path, e.target))
        return fail(errc::invalid_argument, "refused symlink '" + e.path + "' -> '" + e.target.substr(0, 200) +
                                                "': it points outside the workspace");
    } else {
      return fail(errc::malformed, "manifest: unknown entry type");
    }
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<std::string> files_to_fetch(const std::vector<Entry>& wanted, const std::map<std::string, Entry>& have) {
  std::vector<std::string> need;
  for (const auto& e : wanted) {
    if (e.type != EntryType::file) continue;
    auto it = have.find(e.path);
    if (it == have.end() || it->second.type != EntryType::file || it->second.sha256 != e.sha256) need.push_back(e.path);
  }
  return need;
}

std::uint64_t total_file_bytes(const std::vector<Entry>& entries) {
  std::uint64_t n = 0;
  for (const auto& e : entries)
    if (e.type == EntryType::file) n += e.size;
  return n;
}

}  // namespace runsnack::fs
