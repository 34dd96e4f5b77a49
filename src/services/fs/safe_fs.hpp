#pragma once
// Filesystem access under one root folder that a peer cannot escape: every
// path is split by path_rules.hpp and walked component by component with
// openat(O_NOFOLLOW | O_DIRECTORY), so a symlink anywhere in the path (even
// one swapped in during a transfer) makes the operation fail instead of
// leading outside. Files are written to a temporary name in their folder and
// renamed into place, so a reader never sees a half-written file.
//
// Ownership: UniqueFd owns one descriptor. Not thread-safe; no global state.

#include "core/error.hpp"
#include "services/fs/ignore_rules.hpp"
#include "services/fs/manifest.hpp"

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace runsnack::fs {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();
  int get() const { return fd_; }
  int release() { int f = fd_; fd_ = -1; return f; }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Opens (creating with `mkdir -p` when asked) a root folder; the root itself may be reached through symlinks.
Result<UniqueFd> open_root(const std::filesystem::path& path, bool create);
// The folder holding `path` (a valid relative path), created when `create`.
Result<UniqueFd> open_parent(int root, const std::string& path, bool create, std::string* leaf);
// The folder at `path` ("" is the root itself), created when `create`.
Result<UniqueFd> open_dir(int root, const std::string& path, bool create);
Result<UniqueFd> open_regular_file(int root, const std::string& path);

// SHA-256 of what the descriptor reads, lowercase hex.
Result<std::string> sha256_fd(int fd);
std::string sha256_hex(const void* data, std::size_t n);

// path -> (size, mtime ns, sha256): skips rehashing unchanged files.
class HashCache {
 public:
  void load(const std::filesystem::path& file);
  void save(const std::filesystem::path& file) const;
  std::optional<std::string> find(const std::string& path, std::uint64_t size, std::int64_t mtime_ns) const;
  void put(const std::string& path, std::uint64_t size, std::int64_t mtime_ns, std::string sha);

 private:
  struct Item { std::uint64_t size; std::int64_t mtime_ns; std::string sha; };
  std::map<std::string, Item> items_;
};

// Everything under `prefix` ("" for the whole root) that `rules` does not ignore,
// without following symlinks, hashing files (through `cache` when given).
Result<std::vector<Entry>> scan_tree(int root, const std::string& prefix, const IgnoreRules& rules, HashCache* cache);
// What the root holds at `path` now, or nothing.
std::optional<Entry> stat_entry(int root, const std::string& path, HashCache* cache);

// A file being received: a temp name in the target folder until commit().
class AtomicFile {
 public:
  static Result<AtomicFile> create(int root, const std::string& path);
  AtomicFile(AtomicFile&&) noexcept = default;
  AtomicFile& operator=(AtomicFile&&) noexcept = default;
  ~AtomicFile();
  Result<void> write(const void* data, std::size_t n);
  // Renames into place; returns the file's mtime in ns (for HashCache).
  Result<std::int64_t> commit(bool executable);

 private:
  AtomicFile() = default;
  UniqueFd dir_, fd_;
  std::string temp_, leaf_;
  bool committed_ = false;
};

Result<void> make_dir(int root, const std::string& path);
// Replaces what is at `path` (not a folder) with a symlink; the caller checked the target.
Result<void> make_symlink(int root, const std::string& path, const std::string& target);

}  // namespace runsnack::fs
