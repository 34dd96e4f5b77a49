#pragma once
// Which paths a peer may name inside a workspace. Both sides apply these to
// everything the other sends (manifests, pull lists, cp paths): a path is
// relative, has no "." / ".." / empty component, no NUL, and is bounded.
// A symlink is accepted only when its target, resolved lexically from the
// link's own folder, stays inside the root (absolute targets never do), and
// (symlink_resolves_inside) when it still does with every symlink on the way
// followed: a chain s -> ., t -> s/.., u -> t/.. is lexically inside at each
// step and leads two folders above the root. resolve_inside resolves a path a
// peer names (cp, --pull) the same way. Pure functions: the caller says what
// is a symlink.

#include "core/error.hpp"

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace runsnack::fs {

inline constexpr std::size_t kMaxPathBytes = 4096;
inline constexpr std::size_t kMaxComponentBytes = 255;
// Symlinks followed while resolving one (the kernel's own limit): more count as leading outside.
inline constexpr int kMaxLinkHops = 40;

// "a/b/c" -> {"a","b","c"}; errc::invalid_argument with the reason otherwise.
Result<std::vector<std::string>> split_relative_path(std::string_view path);

// Whether a symlink at `link_path` (valid relative path) pointing at `target`
// stays inside the root.
bool symlink_stays_inside(std::string_view link_path, std::string_view target);

// Whether the symlink at `link_path` pointing at `target` stays inside the root when resolved
// as the kernel would: `link_of(p)` is the target of the symlink at root-relative path p
// ("a/b"), or nothing when p is not a symlink.
using LinkLookup = std::function<std::optional<std::string>(const std::string&)>;
bool symlink_resolves_inside(std::string_view link_path, std::string_view target, const LinkLookup& link_of);

// The root-relative path that `path` (checked by split_relative_path) names with every symlink on
// its way followed as above, the last component too only with `follow_last`; "" is the root
// itself. Nothing when the path is refused or leads outside the root.
std::optional<std::string> resolve_inside(std::string_view path, const LinkLookup& link_of, bool follow_last);

}  // namespace runsnack::fs
