#pragma once
// `runsnack log`'s default view: the audit records (store/audit_log.hpp) of
// one session, one command or one decision folded into one line. A `run`
// writes 5 to 7 records (auth, session_open, service, sync, run_start,
// run_end, session_close); its owner wants to read "who ran what, how it
// ended, what it cost" once.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "store/audit_log.hpp"

namespace runsnack::cli {

struct AuditLine {
  TimePoint time{};     // when it began (its first record)
  std::string kind;     // "session", "run", "refused", "kick", "revoke", or a record's own kind
  std::string grant_id;
  std::string peer;
  std::string address;
  std::string what;     // the command, the services a session used, what was refused
  std::string outcome;  // "exit 3", "exit 137 (...)", "closed by the consumer", a refusal's reason; "" while live
  std::vector<std::string> facts;        // "0.2 s", "cpu 0.1 s", "mem 2.2 MB", "in 685 B, out 824 B", ...
  std::vector<std::size_t> records;      // indexes of the records folded into this line, in order
};

// The lines for `records` (in append order), ordered by when each began.
// A record that fits no session or command gets a line of its own, so
// nothing is hidden; records cut off by a limit leave partial lines.
std::vector<AuditLine> audit_lines(const std::vector<AuditEvent>& records);

struct AuditFilter {
  std::string grant_id;  // exact, "" for any
  std::string peer;      // a prefix of the peer id, "" for any
  std::string kind;      // a line's kind or the kind of one of its records, "" for any
  std::optional<TimePoint> until;
};

bool matches(const AuditLine& line, const std::vector<AuditEvent>& records, const AuditFilter& filter);

// One line of text: local time (UTC with `utc`), who, link, kind, what,
// outcome, facts. Peer-made text is escaped (core/printable.hpp).
std::string audit_line_text(const AuditLine& line, const std::string& label, bool utc);

}  // namespace runsnack::cli
