#pragma once
// Every command that takes a LINK accepts, in this order of preference
// (a link is a credential; command lines are visible to other local users):
//   - a saved name (`runsnack remote add NAME -`),
//   - nothing, with RUNSNACK_LINK set in the environment,
//   - "-": the link is read from standard input,
//   - the link itself.

#include "core/error.hpp"
#include "link/link.hpp"

#include <string>

namespace runsnack::cli {

inline constexpr const char* kLinkHelp =
    "The link from `runsnack share`, a name saved with `runsnack remote add`, or '-' to read it from "
    "stdin; may be omitted when RUNSNACK_LINK is set";
// For commands whose other positional arguments make LINK impossible to omit.
inline constexpr const char* kRequiredLinkHelp =
    "The link from `runsnack share`, a name saved with `runsnack remote add`, or '-' to read it from "
    "stdin";

// The pool's links come from `runsnack pool serve`, not `runsnack share`.
inline constexpr const char* kPoolJoinLinkHelp =
    "The pool's join link (`runsnack pool serve` prints it), a name saved with `runsnack remote add`, or '-' to "
    "read it from stdin; may be omitted when RUNSNACK_LINK is set";
inline constexpr const char* kPoolSubmitLinkHelp =
    "The pool's submit link (`runsnack pool serve` prints it), a name saved with `runsnack remote add`, or '-' "
    "to read it from stdin";

Result<Link> resolve_link(const std::string& arg);
// Reads a link from stdin: one line, and the next ones (at most 8 in all) while
// it lacks its secret, as when a chat client wrapped it (link_is_unfinished();
// at a terminal, asking for the rest); at most 4 KiB, trimmed.
Result<std::string> read_link_from_stdin();

}  // namespace runsnack::cli
