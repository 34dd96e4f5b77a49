#include "fs/ignore_rules.hpp"

#include <fnmatch.h>

namespace runsnack::fs {

IgnoreRules::IgnoreRules() { add_pattern(".git/"); }

void IgnoreRules::add_file_text(std::string_view text) {
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    add_pattern(text.substr(start, end - start));
    start = end + 1;
  }
}

void IgnoreRules::add_pattern(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
  if (line.empty() || line.front() == '#') return;
  Rule rule;
  if (line.front() == '!') {
    rule.negate = true;
    line.remove_prefix(1);
  }
  if (!line.empty() && line.back() == '/') {
    rule.dir_only = true;
    line.remove_suffix(1);
  }
  while (line.starts_with("**/")) line.remove_prefix(3);  // "**/x" is "x" at any depth
  if (!line.empty() && line.front() == '/') {
    rule.anchored = true;
    line.remove_prefix(1);
  }
  if (line.find('/') != std::string_view::npos) rule.anchored = true;
  if (line.empty()) return;
  rule.glob = std::string(line);
  rules_.push_back(std::move(rule));
}

void IgnoreRules::add_project_defaults() {
  for (const auto& d : kProjectDefaults) {
    add_pattern(d.pattern);
    rules_.back().what = d.what;
  }
}

const IgnoreRules::Rule* IgnoreRules::deciding(std::string_view path, bool is_dir) const {
  std::string full(path);
  std::string name(path.substr(path.rfind('/') == std::string_view::npos ? 0 : path.rfind('/') + 1));
  const Rule* last = nullptr;
  for (const auto& rule : rules_) {
    if (rule.dir_only && !is_dir) continue;
    const std::string& subject = rule.anchored ? full : name;
    if (fnmatch(rule.glob.c_str(), subject.c_str(), rule.anchored ? FNM_PATHNAME : 0) == 0) last = &rule;
  }
  return last;
}

bool IgnoreRules::ignored(std::string_view path, bool is_dir) const {
  const Rule* rule = deciding(path, is_dir);
  return rule && !rule->negate;
}

const char* IgnoreRules::ignored_by_default(std::string_view path, bool is_dir) const {
  const Rule* rule = deciding(path, is_dir);
  return rule && !rule->negate ? rule->what : nullptr;
}

}  // namespace runsnack::fs
