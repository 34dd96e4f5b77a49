#pragma once
// Saved links by name (`runsnack remote add NAME LINK`), so a consumer can
// write `runsnack run gpu-box -- ...` instead of pasting the link.
//
// File: `remotes.json` in the state directory,
//   {"version": 1, "remotes": {"NAME": "LINK", ...}}
// rewritten whole, atomically (write_file_atomic), with mode 0600: a link
// carries its secret, so the file is a credential.
//
// Links are stored as text; the link layer parses them when they are used.
// Names: [A-Za-z0-9._-]{1,64}. Links: non-empty, at most kRemoteLinkMaxBytes,
// no whitespace or control characters.
//
// Threads and processes: each call reads the file afresh; add() and remove()
// are read-modify-write without a lock, so two processes changing the file at
// the same instant may lose one change (the file itself is never torn).

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace runsnack {

inline constexpr const char* kRemotesFileName = "remotes.json";
inline constexpr std::size_t kRemoteNameMaxBytes = 64;
inline constexpr std::size_t kRemoteLinkMaxBytes = 4096;
// A file larger than this is not one we wrote.
inline constexpr std::size_t kRemotesFileMaxBytes = 4 * 1024 * 1024;

bool valid_remote_name(std::string_view name);

class RemoteStore {
 public:
  explicit RemoteStore(std::filesystem::path file) : file_(std::move(file)) {}

  // `invalid_argument` for a bad name or link, or when `name` exists and
  // `replace` is false.
  Result<void> add(std::string name, std::string link, bool replace);
  // true: removed; false: there was no such name.
  Result<bool> remove(std::string_view name);
  Result<std::optional<std::string>> get(std::string_view name);
  // (name, link) pairs sorted by name.
  Result<std::vector<std::pair<std::string, std::string>>> list();

  // All calls: `malformed` when the file exists but is not ours to read,
  // `io_error` when it cannot be read or written.

 private:
  std::filesystem::path file_;
};

}  // namespace runsnack
