#include "cli/link_arg.hpp"

#include "cli/raw_terminal.hpp"
#include "cli/state.hpp"
#include "store/remote_store.hpp"

#include <cctype>
#include <cstdlib>
#include <iostream>

#include <unistd.h>

namespace runsnack::cli {

namespace {

// Lines a link may be wrapped over on stdin: chat clients wrap long lines.
constexpr int kMaxLinkLines = 8;
constexpr std::size_t kMaxStdinLink = 4096;

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Appends one line of stdin to `text`; true when a newline ended it (more may follow).
Result<bool> read_line(std::string& text) {
  char c;
  while (std::cin.get(c)) {
    if (c == '\n') return true;
    text.push_back(c);
    if (text.size() > kMaxStdinLink) return fail(errc::too_large, "the text on stdin is too long to be a link");
  }
  return false;
}

}  // namespace

Result<std::string> read_link_from_stdin() {
  std::string text;
  {
    // At a terminal: say what is wanted, and keep the secret off the screen.
    // Echo off before the prompt: what is pasted as soon as it shows is hidden too.
    HiddenInput hidden(STDIN_FILENO);
    const bool terminal = hidden.active();
    if (terminal) std::cerr << "Paste the link and press Enter (it is not shown): " << std::flush;
    auto more = read_line(text);
    // A link wrapped over lines (a chat client's) goes on on the next: read on while it lacks its secret.
    for (int lines = 1; more && *more && lines < kMaxLinkLines && link_is_unfinished(text); ++lines) {
      if (terminal) std::cerr << std::endl << "The link is cut short: paste the rest, or press Enter: " << std::flush;
      std::string next;
      more = read_line(next);
      if (more && trimmed(next).empty()) break;
      text += next;
    }
    if (!more) return more.error();
    if (terminal) std::cerr << std::endl;
  }
  while (!text.empty() && (text.back() == '\r' || text.back() == ' ')) text.pop_back();
  if (text.empty()) return fail(errc::invalid_argument, "no link on stdin");
  return text;
}

Result<Link> resolve_link(const std::string& arg) {
  std::string text = arg;
  if (text.empty()) {
    const char* env = std::getenv("RUNSNACK_LINK");
    if (!env || !*env)
      return fail(errc::invalid_argument,
                  "no link given: pass LINK, a saved name (runsnack remote add NAME -), or set RUNSNACK_LINK");
    text = env;
  } else if (text == "-") {
    auto line = read_link_from_stdin();
    if (!line) return line.error();
    text = *line;
  } else if (valid_remote_name(trimmed(text))) {
    // A bare name: a link always has a scheme, so it can never look like one.
    text = std::string(trimmed(text));
    auto file = state_path("remotes.json");
    if (!file) return file.error();
    RemoteStore remotes(*file);
    auto saved = remotes.get(text);
    if (!saved) return saved.error();
    if (!*saved)
      return fail(errc::not_found, "'" + text + "' is neither a link nor a saved remote (see `runsnack remote list`)");
    text = **saved;
  }
  return parse_link(text);
}

}  // namespace runsnack::cli
