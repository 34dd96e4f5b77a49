#pragma once
// What a root holds: scan_tree lists and hashes a tree without following symlinks (walked
// through safe_fs.hpp's rules); stat_entry and tree_unchanged look without reading files.

#include "core/error.hpp"
#include "fs/hash_cache.hpp"
#include "fs/ignore_rules.hpp"
#include "fs/manifest.hpp"
#include "fs/read_bounds.hpp"
#include "fs/safe_fs.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace runsnack::fs {

// What a scan of the user's own folder left out, for the lines that tell them (cli).
struct ScanReport {
  struct Skipped {
    std::string path;  // a folder's ends in '/': it was sent without its contents
    std::string why;   // "permission denied", "a FIFO", "a socket", "a device", "a symlink loop", ...
  };
  struct Defaulted {
    std::string path;
    const char* what;  // IgnoreRules::ignored_by_default
  };
  std::vector<Skipped> skipped;      // in path order
  std::vector<Defaulted> defaulted;  // folders a project default kept here, in path order
};

// Everything under `prefix` ("" for the whole root) that `rules` does not ignore,
// without following symlinks, hashing files (content_digest.hpp; through `cache` when given).
// Sockets, FIFOs and devices never travel. With `max_data_bytes`, a tree whose files hold more
// data than that (holes of sparse files do not count) is errc::too_large once listed, before
// anything is hashed. With `bounds` (read_bounds.hpp: a scan for a peer), a file they refuse fails
// the scan with the reason and its path, and so does a stop (errc::closed); without, a file that
// cannot be read is left out. With `report` (a scan of the user's own folder), what was left out
// is listed there, and so are symlinks that loop (looked at through them: one stat each), which
// are left out too.
Result<std::vector<Entry>> scan_tree(int root, const std::string& prefix, const IgnoreRules& rules, HashCache* cache,
                                     std::optional<std::uint64_t> max_data_bytes = std::nullopt,
                                     const ReadBounds* bounds = nullptr, ScanReport* report = nullptr);

// What the root holds at `path` now, or nothing.
std::optional<Entry> stat_entry(int root, const std::string& path, HashCache* cache);
std::optional<Entry> stat_entry(DirCursor& cursor, const std::string& path, HashCache* cache);
// Whether the root holds exactly `entries` (files checked by stamp against `cache`); extra paths are not looked at.
bool tree_unchanged(int root, const std::vector<Entry>& entries, const HashCache& cache);

}  // namespace runsnack::fs
