#pragma once
// A tree as one side of a sync sees it, and what must travel. The wire form
// is the "files" array of a {"type":"manifest"} control frame:
//   {"p":"src/a.py","t":"f","s":1234,"x":false,"h":"<sha256 hex>"}   file
//   {"p":"lib","t":"d"}                                               folder
//   {"p":"cur","t":"l","l":"src/a.py"}                                symlink
// parse_manifest() checks every path (path_rules.hpp), sizes, hashes, the
// count and duplicates; what fails is errc::malformed / invalid_argument.
// Pure: no filesystem access.

#include "core/error.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace runsnack::fs {

inline constexpr std::size_t kMaxManifestEntries = 200000;
inline constexpr std::uint64_t kMaxFileBytes = std::uint64_t(1) << 44;  // 16 TiB

enum class EntryType { file, dir, link };

struct Entry {
  std::string path;
  EntryType type = EntryType::file;
  std::uint64_t size = 0;
  bool executable = false;
  std::string sha256;  // lowercase hex, files only
  std::string target;  // links only
  bool operator==(const Entry&) const = default;
};

nlohmann::json manifest_json(const std::vector<Entry>& entries);
Result<std::vector<Entry>> parse_manifest(const nlohmann::json& files);

// The files of `wanted` whose content `have` lacks (missing, other hash, or
// another type), in `wanted`'s order. Folders and links never need data.
std::vector<std::string> files_to_fetch(const std::vector<Entry>& wanted, const std::map<std::string, Entry>& have);

std::uint64_t total_file_bytes(const std::vector<Entry>& entries);

}  // namespace runsnack::fs
