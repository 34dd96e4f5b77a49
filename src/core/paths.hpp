#pragma once
// Where this installation keeps its state: $RUNSNACK_HOME when set (tests
// use it), else $XDG_DATA_HOME/runsnack, else ~/.local/share/runsnack.
// The directory is created with mode 0700 on first use.

#include "core/error.hpp"

#include <filesystem>
#include <string_view>

namespace runsnack {

Result<std::filesystem::path> state_dir();

// Writes `contents` to `path` atomically (temp file + rename) with `mode`.
Result<void> write_file_atomic(const std::filesystem::path& path, std::string_view contents, unsigned mode);
Result<std::string> read_file(const std::filesystem::path& path, std::size_t max_bytes);

}  // namespace runsnack
