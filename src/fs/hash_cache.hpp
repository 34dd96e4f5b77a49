#pragma once
// Which files are unchanged since they were hashed: FileStamp (what a change of content, a
// replace or a touch changes) and HashCache (path -> stamp and digest, saved between runs).
// Not thread-safe, except HashCache::vouches() as it says.

#include "fs/manifest.hpp"

#include <sys/stat.h>

#include <array>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace runsnack::fs {

// What says a file is unchanged without reading it: a change of content,
// a replace or a touch changes at least one of these.
struct FileStamp {
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0, ctime_ns = 0;
  std::uint64_t ino = 0;
  bool operator==(const FileStamp&) const = default;
};
FileStamp stamp_of(const struct stat& st);

// path -> (stamp, sha256): skips rehashing unchanged files. An entry is
// trusted only when the file's ctime is at least `racy_ns` older than the
// moment it was vouched for (`as_of_ns`, CLOCK_REALTIME): a write in the same
// clock tick as the hash could leave the stamp as it was (git's "racy" files).
// Saved in a binary file of its own; a damaged file loads as empty.
class HashCache {
 public:
  explicit HashCache(std::int64_t racy_ns = 2'000'000'000) : racy_ns_(racy_ns) {}
  void load(const std::filesystem::path& file);
  // Writes only when something changed since load() (through `file`.tmp, renamed into place). False
  // when it could not be written whole (a full disk): the .tmp is removed, `file` left as it was.
  bool save(const std::filesystem::path& file);
  // The next save() writes even with nothing changed (its file was removed meanwhile).
  void mark_unsaved() { dirty_ = true; }
  std::optional<std::string> find(const std::string& path, const FileStamp& stamp) const;
  // Whether the cache vouches that the file at `path` with `stamp` has SHA-256 `sha_hex`.
  // Safe to call from several threads at once, after index() and while nothing is changed.
  bool vouches(const std::string& path, const FileStamp& stamp, const std::string& sha_hex) const;
  void index() const;
  void put(const std::string& path, const FileStamp& stamp, std::string sha, std::int64_t as_of_ns);
  // Drops what is not a file of `entries`.
  void retain(const std::vector<Entry>& entries);
  // Waits until no entry is racy any more (at most racy_ns) and vouches for all entries now:
  // for the provider's freshly written workspace files, whose only writer is the sync itself.
  void settle();
  std::size_t size() const { return items_.size(); }
  // About what this cache takes in memory (its items, their paths and the index), in bytes.
  std::size_t memory_bytes() const;
  HashCache(HashCache&&) = delete;  // index_ points into items_

 private:
  struct Item {
    std::string path;
    FileStamp stamp;
    std::int64_t as_of_ns = 0;
    std::array<std::uint8_t, 32> sha{};
  };
  // Items in the order save() wrote them, which is the order the next scan asks in: a lookup
  // first tries the item after the previous one and hashes a path only when that misses.
  Item* locate(const std::string& path) const;
  std::int64_t racy_ns_;
  std::deque<Item> items_;  // push_back keeps elements in place: index_ views their paths
  mutable std::unordered_map<std::string_view, std::size_t> index_;
  mutable bool indexed_ = false;
  mutable std::size_t next_ = 0;
  bool dirty_ = false;
};

std::int64_t wall_clock_ns();

}  // namespace runsnack::fs
