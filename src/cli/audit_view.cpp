#include "cli/audit_view.hpp"

#include <algorithm>
#include <ctime>
#include <deque>
#include <map>
#include <sstream>

#include "core/printable.hpp"
#include "sandbox/run_terms.hpp"

namespace runsnack::cli {

namespace {

using nlohmann::json;

std::string text_of(const json& detail, const char* key) {
  if (!detail.is_object()) return {};
  auto it = detail.find(key);
  return it != detail.end() && it->is_string() ? it->get<std::string>() : std::string();
}

double number_of(const json& detail, const char* key, double otherwise = -1) {
  if (!detail.is_object()) return otherwise;
  auto it = detail.find(key);
  return it != detail.end() && it->is_number() ? it->get<double>() : otherwise;
}

std::string bytes_fact(const char* name, double bytes) {
  return std::string(name) + " " + exec::size_text(static_cast<std::uint64_t>(std::max(bytes, 0.0)));
}

// "exit 3", "signal 9", plus the provider's reason when it gave one.
std::string command_outcome(const AuditEvent& end) {
  std::string out;
  if (end.detail.is_object() && end.detail.contains("signal") && end.detail["signal"].is_number())
    out = "signal " + std::to_string(end.detail["signal"].get<int>());
  else if (double status = number_of(end.detail, "exit_status"); status >= 0)
    out = "exit " + std::to_string(static_cast<int>(status));
  else out = "ended";
  if (!end.reason.empty()) out += " (" + end.reason + ")";
  return out;
}

void add_command_facts(AuditLine& line, const AuditEvent& end) {
  if (double s = number_of(end.detail, "seconds"); s >= 0) line.facts.push_back(exec::seconds_text(s));
  const double user = number_of(end.detail, "cpu_user_s", 0), sys = number_of(end.detail, "cpu_sys_s", 0);
  line.facts.push_back("cpu " + exec::seconds_text(user + sys));
  if (double peak = number_of(end.detail, "peak_memory_bytes"); peak >= 0) line.facts.push_back(bytes_fact("mem", peak));
  if (double gpu = number_of(end.detail, "peak_gpu_memory_bytes"); gpu >= 0) line.facts.push_back(bytes_fact("gpu", gpu));
}

AuditLine line_of(const AuditEvent& e, std::size_t index, std::string kind) {
  AuditLine line;
  line.time = e.time;
  line.kind = std::move(kind);
  line.grant_id = e.grant_id;
  line.peer = e.peer;
  line.address = e.address;
  line.records.push_back(index);
  return line;
}

// A session's line, whose facts are filled in at its close (or left as
// they are while it is live).
struct SessionState {
  std::size_t line = 0;
  std::vector<std::string> services;
  std::string last_service;
  double files = 0, bytes = 0;
  std::deque<std::size_t> open_commands;  // lines of commands started and not yet ended, oldest first
};

std::string session_what(const SessionState& s) {
  std::string what;
  for (const auto& name : s.services) what += (what.empty() ? "" : ",") + name;
  if (what.empty()) what = "-";
  if (s.files > 0 || s.bytes > 0)
    what += "; sent " + std::to_string(static_cast<long long>(s.files)) + (s.files == 1 ? " file, " : " files, ") +
            exec::size_text(static_cast<std::uint64_t>(s.bytes));
  return what;
}

}  // namespace

std::vector<AuditLine> audit_lines(const std::vector<AuditEvent>& records) {
  std::vector<AuditLine> lines;
  std::map<std::string, SessionState> sessions;
  auto session_of = [&](const AuditEvent& e, std::size_t index) -> SessionState& {
    const std::string id = text_of(e.detail, "session");
    auto [it, fresh] = sessions.try_emplace(id);
    if (fresh) {
      it->second.line = lines.size();
      lines.push_back(line_of(e, index, "session"));
      lines.back().what = "-";
    } else {
      lines[it->second.line].records.push_back(index);
    }
    return it->second;
  };
  for (std::size_t i = 0; i < records.size(); ++i) {
    const AuditEvent& e = records[i];
    const std::string session = text_of(e.detail, "session");
    const bool refused = e.decision == "refuse";
    if (session.empty() || (refused && e.kind != "run_start")) {
      // A decision outside a session (a refused connection, a revocation),
      // or a refusal inside one: a line of its own.
      AuditLine line = line_of(e, i, refused ? "refused" : e.kind);
      if (e.kind == "kick") line.what = "session " + text_of(e.detail, "session");
      else if (e.kind == "service") line.what = "service '" + text_of(e.detail, "service") + "'";
      else if (refused) line.what = e.kind;
      else if (e.kind == "revoke") line.what = "the link";
      else line.what = e.decision.empty() ? "-" : e.decision;
      line.outcome = e.reason;
      if (double n = number_of(e.detail, "count"); n > 1)
        line.facts.push_back(std::to_string(static_cast<long long>(n)) + " times");
      lines.push_back(std::move(line));
      if (!session.empty()) session_of(e, i);  // the session it happened in is listed too
      continue;
    }
    if (e.kind == "kick") {  // a kick names the session it ended: its own line
      AuditLine line = line_of(e, i, "kick");
      line.what = "session " + session;
      lines.push_back(std::move(line));
      continue;
    }
    SessionState& s = session_of(e, i);
    // By index: the lines grow below (a reference would dangle).
    auto sl = [&]() -> AuditLine& { return lines[s.line]; };
    if (e.kind == "service") {
      const std::string name = text_of(e.detail, "service");
      if (!name.empty() && std::find(s.services.begin(), s.services.end(), name) == s.services.end())
        s.services.push_back(name);
      if (!name.empty()) s.last_service = name;
    } else if (e.kind == "sync" || e.kind == "cp_put") {
      s.files += std::max(number_of(e.detail, "files", 0), 0.0);
      s.bytes += std::max(number_of(e.detail, "bytes", 0), 0.0);
    } else if (e.kind == "run_start") {
      sl().records.pop_back();  // the command's line holds it
      AuditLine line = line_of(e, i, s.last_service.empty() ? "run" : s.last_service);
      line.what = text_of(e.detail, "command");
      if (refused) line.outcome = "refused: " + e.reason;
      else s.open_commands.push_back(lines.size());
      lines.push_back(std::move(line));
    } else if (e.kind == "run_end") {
      sl().records.pop_back();
      const std::string command = text_of(e.detail, "command");
      // The oldest open command of the session with that text (a shell runs one; a session may run several).
      auto open = std::find_if(s.open_commands.begin(), s.open_commands.end(),
                               [&](std::size_t l) { return lines[l].what == command; });
      std::size_t at;
      if (open != s.open_commands.end()) {
        at = *open;
        s.open_commands.erase(open);
        lines[at].records.push_back(i);
      } else {  // its start was cut off by the limit
        at = lines.size();
        lines.push_back(line_of(e, i, s.last_service.empty() ? "run" : s.last_service));
        lines[at].what = command;
      }
      lines[at].outcome = command_outcome(e);
      add_command_facts(lines[at], e);
    } else if (e.kind == "session_close") {
      sl().outcome = e.reason.empty() ? "closed" : e.reason;
      if (double s2 = number_of(e.detail, "seconds"); s2 >= 0) sl().facts.push_back(exec::seconds_text(s2));
      if (double in = number_of(e.detail, "bytes_in"); in >= 0) sl().facts.push_back(bytes_fact("in", in));
      if (double out = number_of(e.detail, "bytes_out"); out >= 0) sl().facts.push_back(bytes_fact("out", out));
      if (auto path = text_of(e.detail, "path"); !path.empty()) sl().facts.push_back(path);
      if (auto ended = text_of(e.detail, "ended"); !ended.empty() && sl().outcome.find(ended) == std::string::npos)
        sl().outcome += " (" + ended + ")";
    }
    if (sl().address.empty()) sl().address = e.address;
    if (sl().peer.empty()) sl().peer = e.peer;
    sl().what = session_what(s);
  }
  for (auto& [id, s] : sessions) {
    AuditLine& sl = lines[s.line];
    if (sl.outcome.empty()) sl.outcome = "open (or its end was not recorded)";
  }
  std::stable_sort(lines.begin(), lines.end(), [](const AuditLine& a, const AuditLine& b) { return a.time < b.time; });
  return lines;
}

bool matches(const AuditLine& line, const std::vector<AuditEvent>& records, const AuditFilter& filter) {
  if (!filter.grant_id.empty() && line.grant_id != filter.grant_id) return false;
  if (!filter.peer.empty() && line.peer.compare(0, filter.peer.size(), filter.peer) != 0) return false;
  if (filter.until && line.time > *filter.until) return false;
  if (filter.kind.empty() || line.kind == filter.kind) return true;
  return std::any_of(line.records.begin(), line.records.end(),
                     [&](std::size_t i) { return records[i].kind == filter.kind; });
}

std::string audit_line_text(const AuditLine& line, const std::string& label, bool utc) {
  const std::time_t t = std::chrono::system_clock::to_time_t(line.time);
  std::tm tm{};
  if (utc) gmtime_r(&t, &tm);
  else localtime_r(&t, &tm);
  char when[32];
  std::strftime(when, sizeof when, utc ? "%Y-%m-%d %H:%M:%SZ" : "%Y-%m-%d %H:%M:%S", &tm);
  std::ostringstream out;
  out << when << "  " << (line.peer.empty() ? std::string("-") : printable(line.peer.substr(0, 12)));
  out << "  " << (line.grant_id.empty() ? std::string("-") : printable(line.grant_id));
  if (!label.empty()) out << " (" << printable(label) << ")";
  out << "  " << printable(line.kind) << "  " << printable(line.what);
  if (!line.outcome.empty()) out << "  -> " << printable(line.outcome);
  std::string facts;
  for (const auto& f : line.facts) facts += (facts.empty() ? "" : ", ") + f;
  if (!facts.empty()) out << "  [" << facts << "]";
  if (!line.address.empty()) out << "  from " << printable(line.address);
  return out.str();
}

}  // namespace runsnack::cli
