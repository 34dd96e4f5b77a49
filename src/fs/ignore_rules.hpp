#pragma once
// Ignore rules in the spirit of .gitignore (a reasonable subset): one pattern
// per line, `#` comments and blank lines skipped, `!pattern` re-includes,
// `dir/` matches folders only, a pattern with a `/` (other than a trailing
// one) is anchored at the root, one without matches the name at any depth;
// globs are fnmatch(3) globs (`*`, `?`, `[...]`) plus `**/` prefixes.
// The last matching pattern wins. `.git/` is always ignored (history, often large; `!.git/`
// sends it). `run`'s sync adds kProjectDefaults first (add_project_defaults), so that a line
// of the rule files (`!.venv/`) overrides them.
// Pure: rules are parsed from text; the caller reads the files.

#include <string>
#include <string_view>
#include <vector>

namespace runsnack::fs {

// The files a synced tree's rules come from, at its root.
inline constexpr const char* kIgnoreRuleFiles[] = {".gitignore", ".runsnackignore"};

// Folders of a project folder that a user rarely means to send to a GPU machine: made for this
// machine (a virtualenv's interpreter and compiled wheels, native Node modules), rebuilt there in
// seconds, or both, and often most of the folder's files. `what` names it in the line that says
// they stayed here.
struct DefaultIgnore {
  const char* pattern;
  const char* what;
};
inline constexpr DefaultIgnore kProjectDefaults[] = {{".venv/", "a virtualenv"},
                                                     {"venv/", "a virtualenv"},
                                                     {"__pycache__/", "Python bytecode"},
                                                     {"node_modules/", "Node packages"}};

class IgnoreRules {
 public:
  IgnoreRules();
  // Adds the patterns of one ignore file (the root's .gitignore, .runsnackignore).
  void add_file_text(std::string_view text);
  void add_pattern(std::string_view line);
  // Adds kProjectDefaults (before the rule files' patterns, which then override them).
  void add_project_defaults();
  // `path` is relative to the root, '/'-separated.
  bool ignored(std::string_view path, bool is_dir) const;
  // The `what` of the project default that ignores `path` (kProjectDefaults), or nullptr when it is
  // not ignored or another rule decided.
  const char* ignored_by_default(std::string_view path, bool is_dir) const;

 private:
  struct Rule {
    std::string glob;
    bool negate = false;
    bool dir_only = false;
    bool anchored = false;
    const char* what = nullptr;  // a project default's
  };
  // The last rule that matches `path`, or nullptr.
  const Rule* deciding(std::string_view path, bool is_dir) const;
  std::vector<Rule> rules_;
};

}  // namespace runsnack::fs
