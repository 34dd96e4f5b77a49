#include "cli/link_arg.hpp"

#include "cli/raw_terminal.hpp"
#include "cli/state.hpp"
#include "store/remote_store.hpp"

#include <cctype>
#include <cstdlib>
#include <iostream>

#include <unistd.h>

namespace runsnack::cli {

Result<std::string> read_link_from_stdin() {
  std::string line;
  {
    // At a terminal: say what is wanted, and keep the secret off the screen.
    // Echo off before the prompt: what is pasted as soon as it shows is hidden too.
    HiddenInput hidden(STDIN_FILENO);
    const bool terminal = hidden.active();
    if (terminal) std::cerr << "Paste the link and press Enter (it is not shown): " << std::flush;
    char c;
    while (std::cin.get(c) && c != '\n') {
      line.push_back(c);
      if (line.size() > 4096) return fail(errc::too_large, "the text on stdin is too long to be a link");
    }
    if (terminal) std::cerr << std::endl;
  }
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  if (line.empty()) return fail(errc::invalid_argument, "no link on stdin");
  return line;
}

namespace {
std::string_view trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}
}  // namespace

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
