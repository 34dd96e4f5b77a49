#include "fs/path_rules.hpp"

#include <deque>

namespace runsnack::fs {

Result<std::vector<std::string>> split_relative_path(std::string_view path) {
  auto bad = [&](const char* why) {
    return fail(errc::invalid_argument, "refused path '" + std::string(path.substr(0, 200)) + "': " + why);
  };
  if (path.empty()) return bad("empty");
  if (path.size() > kMaxPathBytes) return bad("too long");
  if (path.front() == '/') return bad("absolute paths are not allowed");
  if (path.find('\0') != std::string_view::npos) return bad("contains NUL");
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(start, end - start);
    if (part.empty()) return bad("empty component");
    if (part == "." || part == "..") return bad("'.' and '..' are not allowed");
    if (part.size() > kMaxComponentBytes) return bad("component too long");
    parts.emplace_back(part);
    start = end + 1;
  }
  return parts;
}

bool symlink_stays_inside(std::string_view link_path, std::string_view target) {
  if (target.empty() || target.front() == '/' || target.size() > kMaxPathBytes) return false;
  if (target.find('\0') != std::string_view::npos) return false;
  auto parts = split_relative_path(link_path);
  if (!parts) return false;
  parts->pop_back();  // the link's own folder
  std::size_t start = 0;
  while (start <= target.size()) {
    std::size_t end = target.find('/', start);
    if (end == std::string_view::npos) end = target.size();
    std::string_view part = target.substr(start, end - start);
    if (part == "..") {
      if (parts->empty()) return false;
      parts->pop_back();
    } else if (!part.empty() && part != ".") {
      parts->emplace_back(part);
    }
    start = end + 1;
  }
  return true;
}

namespace {

void push_front_components(std::deque<std::string>& pending, std::string_view path) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    if (end > start) parts.emplace_back(path.substr(start, end - start));
    start = end + 1;
  }
  pending.insert(pending.begin(), parts.begin(), parts.end());
}

// Walks `pending` components from the folder `resolved` as the kernel would, following each
// symlink (its target resolved from the folder that holds it), the last component only with
// `follow_last`. False when the walk leaves the root or follows too many links.
bool walk_inside(std::vector<std::string>& resolved, std::deque<std::string>& pending, const LinkLookup& link_of,
                 bool follow_last) {
  int hops = 0;
  std::string path;
  while (!pending.empty()) {
    std::string part = std::move(pending.front());
    pending.pop_front();
    if (part == ".") continue;
    if (part == "..") {
      if (resolved.empty()) return false;
      resolved.pop_back();
      continue;
    }
    path.clear();
    for (const auto& r : resolved) path += r + "/";
    path += part;
    if (follow_last || !pending.empty()) {
      if (auto next = link_of(path)) {
        if (++hops > kMaxLinkHops || next->empty() || next->front() == '/' || next->size() > kMaxPathBytes ||
            next->find('\0') != std::string::npos)
          return false;
        push_front_components(pending, *next);  // resolved from the folder that holds that link
        continue;
      }
    }
    resolved.push_back(std::move(part));
  }
  return true;
}

}  // namespace

bool symlink_resolves_inside(std::string_view link_path, std::string_view target, const LinkLookup& link_of) {
  if (!symlink_stays_inside(link_path, target)) return false;
  auto parts = split_relative_path(link_path);
  if (!parts) return false;
  parts->pop_back();
  std::vector<std::string> resolved = std::move(*parts);  // the link's folder: no symlink in it (walked by the receiver)
  std::deque<std::string> pending;
  push_front_components(pending, target);
  return walk_inside(resolved, pending, link_of, true);
}

std::optional<std::string> resolve_inside(std::string_view path, const LinkLookup& link_of, bool follow_last) {
  auto parts = split_relative_path(path);
  if (!parts) return std::nullopt;
  std::vector<std::string> resolved;
  std::deque<std::string> pending(parts->begin(), parts->end());
  if (!walk_inside(resolved, pending, link_of, follow_last)) return std::nullopt;
  std::string out;
  for (const auto& r : resolved) out += (out.empty() ? "" : "/") + r;
  if (!out.empty() && !split_relative_path(out)) return std::nullopt;  // e.g. over kMaxPathBytes through links
  return out;
}

}  // namespace runsnack::fs
