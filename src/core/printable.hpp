#pragma once
// Text a peer controls, made safe to print on a terminal: host names, GPU
// names, labels, error texts and reasons from the other side. Control
// characters (C0, DEL, C1), bidirectional-override and other invisible
// formatting characters, and bytes that are not UTF-8 are shown as escapes
// (\x1b, \u009b, \u202e), so a hostile peer cannot move the cursor, retitle
// the window, clear the screen or hide text behind a right-to-left override.
// Printable UTF-8 (any script) passes unchanged. For eyes, not parsers: a
// backslash is left as it is.

#include <string>
#include <string_view>

namespace runsnack {

// One line: newlines and tabs are escaped too.
std::string printable(std::string_view text);
// Several lines (a remote command's error output): '\n' and '\t' kept.
std::string printable_lines(std::string_view text);

}  // namespace runsnack
