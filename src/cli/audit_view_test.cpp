// `runsnack log`'s lines (issue 39, item 8): one `run` used to print 7 records of inline JSON.
#include "cli/audit_view.hpp"

#include <gtest/gtest.h>

namespace runsnack::cli {
namespace {

using nlohmann::json;

TimePoint at(int second) { return TimePoint{} + std::chrono::hours(24 * 365 * 56) + std::chrono::seconds(second); }

AuditEvent record(int second, std::string kind, std::string decision, std::string reason, json detail,
                  std::string peer = "hifhafxukqsnabcdef", std::string grant = "nnwrljp65u") {
  return {at(second), std::move(kind), std::move(grant), std::move(peer), "192.0.2.2:40000", std::move(decision),
          std::move(reason), std::move(detail)};
}

std::vector<AuditEvent> one_run(const std::string& session, int second, const std::string& command) {
  return {
      record(second, "auth", "accept", "", {{"session", session}, {"connections", 1}}),
      record(second, "session_open", "accept", "", {{"session", session}, {"path", "direct"}}),
      record(second, "service", "accept", "", {{"session", session}, {"service", "run"}}),
      record(second, "sync", "accept", "", {{"session", session}, {"files", 2}, {"bytes", 3000}}),
      record(second, "service", "accept", "", {{"session", session}, {"service", "run"}}),
      record(second, "run_start", "accept", "", {{"session", session}, {"command", command}}),
      record(second + 1, "run_end", "", "",
             {{"session", session}, {"command", command}, {"exit_status", 3}, {"signal", nullptr}, {"seconds", 1.5},
              {"cpu_user_s", 0.5}, {"cpu_sys_s", 0.25}, {"peak_memory_bytes", 2 * 1024 * 1024}}),
      record(second + 2, "session_close", "", "closed by the consumer",
             {{"session", session}, {"bytes_in", 685}, {"bytes_out", 824}, {"seconds", 2.0}, {"path", "direct"}}),
  };
}

TEST(AuditView, ARunIsOneSessionLineAndOneCommandLine) {
  auto records = one_run("s1", 0, "python3 train.py");
  auto lines = audit_lines(records);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].kind, "session");
  EXPECT_EQ(lines[0].what, "run; sent 2 files, 2.9 KB");
  EXPECT_EQ(lines[0].outcome, "closed by the consumer");
  EXPECT_EQ(lines[0].facts, (std::vector<std::string>{"2 s", "in 685 bytes", "out 824 bytes", "direct"}));
  EXPECT_EQ(lines[1].kind, "run");
  EXPECT_EQ(lines[1].what, "python3 train.py");
  EXPECT_EQ(lines[1].outcome, "exit 3");
  EXPECT_EQ(lines[1].facts, (std::vector<std::string>{"1.5 s", "cpu 0.8 s", "mem 2 MB"}));
  // Every record is in exactly one line.
  std::vector<std::size_t> all;
  for (const auto& l : lines) all.insert(all.end(), l.records.begin(), l.records.end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, (std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(AuditView, InterleavedSessionsStayApartAndAStopReasonIsShown) {
  auto a = one_run("s1", 0, "sleep 100");
  auto b = one_run("s2", 0, "echo hi");
  std::vector<AuditEvent> records;
  for (std::size_t i = 0; i < a.size(); ++i) records.push_back(a[i]), records.push_back(b[i]);
  records[12].reason = "the command was stopped at its 3 s time limit";  // s1's run_end
  ASSERT_EQ(records[12].kind, "run_end");
  auto lines = audit_lines(records);
  ASSERT_EQ(lines.size(), 4u);
  int commands = 0;
  for (const auto& l : lines) {
    if (l.kind != "run") continue;
    ++commands;
    if (l.what == "sleep 100") EXPECT_EQ(l.outcome, "exit 3 (the command was stopped at its 3 s time limit)");
    else EXPECT_EQ(l.outcome, "exit 3");
  }
  EXPECT_EQ(commands, 2);
}

TEST(AuditView, RefusalsKicksAndSignalsHaveLinesOfTheirOwn) {
  std::vector<AuditEvent> records = {
      record(0, "auth", "refuse", "the link was revoked", {{"count", 4}}, "", ""),
      record(1, "auth", "accept", "", {{"session", "s1"}}),
      record(1, "service", "refuse", "the link does not allow 'shell'", {{"session", "s1"}, {"service", "shell"}}),
      record(2, "kick", "", "", {{"session", "s1"}}),
      record(3, "run_end", "", "", {{"session", "s2"}, {"command", "yes"}, {"exit_status", 137}, {"signal", 9}}),
  };
  auto lines = audit_lines(records);
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[0].kind, "refused");
  EXPECT_EQ(lines[0].outcome, "the link was revoked");
  EXPECT_EQ(lines[0].facts, std::vector<std::string>{"4 times"});
  EXPECT_EQ(lines[1].kind, "session");
  EXPECT_EQ(lines[1].outcome, "open (or its end was not recorded)");
  EXPECT_EQ(lines[2].kind, "refused");
  EXPECT_EQ(lines[2].what, "service 'shell'");
  EXPECT_EQ(lines[3].kind, "kick");
  EXPECT_EQ(lines[3].what, "session s1");
  // Its session's and its start were before the range read: lines all the same.
  EXPECT_EQ(lines[4].kind, "session");
  EXPECT_EQ(lines[5].kind, "run");
  EXPECT_EQ(lines[5].what, "yes");
  EXPECT_EQ(lines[5].outcome, "signal 9");
}

TEST(AuditView, FiltersByLinkPeerKindAndTime) {
  auto records = one_run("s1", 0, "a");
  auto other = one_run("s2", 10, "b");
  for (auto& r : other) r.grant_id = "othergrant", r.peer = "zzzpeer";
  records.insert(records.end(), other.begin(), other.end());
  auto lines = audit_lines(records);
  auto count = [&](AuditFilter f) {
    return std::count_if(lines.begin(), lines.end(), [&](const AuditLine& l) { return matches(l, records, f); });
  };
  EXPECT_EQ(count({}), 4);
  EXPECT_EQ(count({.grant_id = "othergrant"}), 2);
  EXPECT_EQ(count({.peer = "hifh"}), 2);
  EXPECT_EQ(count({.kind = "run"}), 2);
  EXPECT_EQ(count({.kind = "sync"}), 2);  // a record's kind finds the lines that hold one
  EXPECT_EQ(count({.until = at(5)}), 2);
}

TEST(AuditView, TextIsOneEscapedLine) {
  auto records = one_run("s1", 0, "echo evil\u202etxt.exe\nrm -rf /");
  auto lines = audit_lines(records);
  const std::string text = audit_line_text(lines[1], "lab\x1b[31m", true);
  EXPECT_EQ(text.find('\n'), std::string::npos);
  EXPECT_EQ(text.find("\u202e"), std::string::npos);
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
  EXPECT_NE(text.find("\\u202e"), std::string::npos) << text;
  EXPECT_NE(text.find("hifhafxukqsn  nnwrljp65u (lab"), std::string::npos) << text;
  EXPECT_NE(text.find("  run  echo evil"), std::string::npos) << text;
  EXPECT_NE(text.find("-> exit 3  [1.5 s, cpu 0.8 s, mem 2 MB]  from 192.0.2.2:40000"), std::string::npos) << text;
  EXPECT_NE(text.find("Z  "), std::string::npos) << text;  // --utc says so
}

}  // namespace
}  // namespace runsnack::cli
