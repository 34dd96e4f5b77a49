#pragma once
// Which paths a peer may name inside a workspace. Both sides apply these to
// everything the other sends (manifests, pull lists, cp paths): a path is
// relative, has no "." / ".." / empty component, no NUL, and is bounded.
// A symlink is accepted only when its target, resolved lexically from the
// link's own folder, stays inside the root (absolute targets never do).
// Pure functions: no filesystem access.

#include "core/error.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace runsnack::fs {

inline constexpr std::size_t kMaxPathBytes = 4096;
inline constexpr std::size_t kMaxComponentBytes = 255;

// "a/b/c" -> {"a","b","c"}; errc::invalid_argument with the reason otherwise.
Result<std::vector<std::string>> split_relative_path(std::string_view path);

// Whether a symlink at `link_path` (valid relative path) pointing at `target`
// stays inside the root.
bool symlink_stays_inside(std::string_view link_path, std::string_view target);

}  // namespace runsnack::fs
