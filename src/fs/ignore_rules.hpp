#pragma once
// Ignore rules in the spirit of .gitignore (a reasonable subset): one pattern
// per line, `#` comments and blank lines skipped, `!pattern` re-includes,
// `dir/` matches folders only, a pattern with a `/` (other than a trailing
// one) is anchored at the root, one without matches the name at any depth;
// globs are fnmatch(3) globs (`*`, `?`, `[...]`) plus `**/` prefixes.
// The last matching pattern wins. `.git/` is always ignored.
// Pure: rules are parsed from text; the caller reads the files.

#include <string>
#include <string_view>
#include <vector>

namespace runsnack::fs {

// The files a synced tree's rules come from, at its root.
inline constexpr const char* kIgnoreRuleFiles[] = {".gitignore", ".runsnackignore"};

class IgnoreRules {
 public:
  IgnoreRules();
  // Adds the patterns of one ignore file (the root's .gitignore, .runsnackignore).
  void add_file_text(std::string_view text);
  void add_pattern(std::string_view line);
  // `path` is relative to the root, '/'-separated.
  bool ignored(std::string_view path, bool is_dir) const;

 private:
  struct Rule {
    std::string glob;
    bool negate = false;
    bool dir_only = false;
    bool anchored = false;
  };
  std::vector<Rule> rules_;
};

}  // namespace runsnack::fs
