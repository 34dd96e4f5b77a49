#pragma once
// Filesystem access under one root folder that a peer cannot escape: every
// path is split by path_rules.hpp and walked component by component with
// openat(O_NOFOLLOW | O_DIRECTORY), so a symlink anywhere in the path (even
// one swapped in during a transfer) makes the operation fail instead of
// leading outside. Files are written to a temporary name in their folder and
// renamed into place, so a reader never sees a half-written file.
//
// Where the writer is a root provider and the tree belongs to a sandbox uid
// (sandbox/launch.hpp), what is created gets that Owner.
//
// Ownership: UniqueFd owns one descriptor. Not thread-safe; no global state.

#include "core/error.hpp"
#include "fs/hash_cache.hpp"
#include "fs/manifest.hpp"

#include <sys/stat.h>

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

// Who owns what a transfer creates.
struct Owner {
  uid_t uid = 0;
  gid_t gid = 0;
};

// Opens (creating with `mkdir -p` when asked) a root folder; the root itself may be reached through symlinks.
Result<UniqueFd> open_root(const std::filesystem::path& path, bool create);
// The folder holding `path` (a valid relative path), created when `create` (owned by `owner` when given).
Result<UniqueFd> open_parent(int root, const std::string& path, bool create, std::string* leaf,
                             const Owner* owner = nullptr);
// The folder at `path` ("" is the root itself), created when `create`.
Result<UniqueFd> open_dir(int root, const std::string& path, bool create, const Owner* owner = nullptr);
Result<UniqueFd> open_regular_file(int root, const std::string& path);
// The target of the symlink at `path` (no symlink followed on the way), or nothing.
std::optional<std::string> link_target_at(int root, const std::string& path);

// Reads until `buf` is full or the file ends (at `offset` when `positional`, else from the
// file position): chunk boundaries must not depend on short reads.
Result<std::size_t> read_full(int fd, std::span<std::uint8_t> buf, std::uint64_t offset, bool positional);
std::string sha256_hex(const void* data, std::size_t n);
// The error for a failed system call on `what` (from errno): a symlink or non-folder in the way
// is errc::refused, a full disk or quota errc::exhausted, anything else errc::io_error.
Error sys_error(const std::string& what);

// Walks a sequence of paths reusing the folder descriptor while consecutive
// paths share a folder (a manifest lists a folder's entries together).
class DirCursor {
 public:
  explicit DirCursor(int root, std::optional<Owner> owner = std::nullopt) : root_(root), owner_(owner) {}
  // The folder holding `path` (a valid relative path; created when `create`); *leaf is its last component.
  Result<int> parent_of(const std::string& path, bool create, std::string* leaf);
  // Who gets what is created through this cursor (none: the writer).
  const Owner* owner() const { return owner_ ? &*owner_ : nullptr; }

 private:
  int root_;
  std::optional<Owner> owner_;
  std::string dir_;
  UniqueFd fd_;
};

// The stamp of the file at `path`, when it is a regular file.
std::optional<FileStamp> stamp_at(DirCursor& cursor, const std::string& path);

// A file being received: a temp name in the target folder until commit().
class AtomicFile {
 public:
  static Result<AtomicFile> create(int root, const std::string& path);
  static Result<AtomicFile> create(DirCursor& cursor, const std::string& path);
  AtomicFile(AtomicFile&&) noexcept = default;
  AtomicFile& operator=(AtomicFile&&) noexcept = default;
  ~AtomicFile();
  Result<void> write(const void* data, std::size_t n);
  // Leaves the next `n` bytes a hole (a sparse file's zeros, never written).
  Result<void> skip(std::uint64_t n);
  // Renames into place; returns the file's stamp after the rename (for HashCache).
  Result<FileStamp> commit(bool executable);
  // Instead of removing it, keeps what was written under resume_name(leaf) for a later transfer.
  void keep_partial();
  std::uint64_t written() const { return written_; }
  int dir_fd() const { return dir_.get(); }
  const std::string& leaf() const { return leaf_; }

 private:
  AtomicFile() = default;
  UniqueFd dir_, fd_;
  std::string temp_, leaf_;
  std::uint64_t written_ = 0;
  bool holes_ = false;  // the file ends in a hole unless it is truncated to its size
  bool committed_ = false;
};

// The name, in the same folder, under which an interrupted transfer of `leaf` keeps its
// prefix (scan_tree skips it like every ".runsnack-part-" name).
std::string resume_name(const std::string& leaf);

// Gives the regular file at `path` the executable bits (0755) or takes them away, no symlink followed.
Result<void> set_executable(DirCursor& cursor, const std::string& path, bool executable);

// Makes the folder at `path` (replacing a symlink there, which is never followed); an existing folder is fine.
Result<void> make_dir(int root, const std::string& path);
Result<void> make_dir(DirCursor& cursor, const std::string& path);
// Replaces what is at `path` (not a folder) with a symlink; the caller checked the target.
Result<void> make_symlink(int root, const std::string& path, const std::string& target);
Result<void> make_symlink(DirCursor& cursor, const std::string& path, const std::string& target);
// Removes the file or symlink at `path` when it is still what `cache` / `link_target` says a sync put
// there, or the folder when it is empty; anything else stays. Whether something was removed.
bool remove_synced(DirCursor& cursor, const Entry& entry, const HashCache& cache);

}  // namespace runsnack::fs
