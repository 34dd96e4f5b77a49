// `runsnack sessions`: who is connected right now, to the links of this
// machine, and the commands each runs with what they use (measured now:
// services/exec/process_usage.hpp, gpu/process_memory.hpp); `runsnack kick
// SESSION`: end one session (the link stays valid). Both read the sessions
// table the providers keep (store/session_store.hpp).
#include "cli/command.hpp"
#include "cli/state.hpp"
#include "cli/text_column.hpp"
#include "core/clock.hpp"
#include "core/duration.hpp"
#include "core/printable.hpp"
#include "gpu/process_memory.hpp"
#include "services/exec/process_usage.hpp"
#include "sandbox/run_terms.hpp"
#include "store/audit_log.hpp"
#include "store/session_store.hpp"

#include <cstdio>
#include <iomanip>
#include <iostream>

namespace runsnack::cli {

namespace {

struct Measured {
  exec::CommandUsage usage;
  std::optional<std::uint64_t> gpu_bytes;
};

// What each command uses now. Reading another uid's processes may be refused: that is unknown, not an error.
std::map<std::int64_t, Measured> measure(const std::vector<SessionRow>& sessions) {
  std::map<std::int64_t, Measured> out;
  bool any = false;
  for (const auto& s : sessions) any |= !s.commands.empty();
  if (!any) return out;
  const auto processes = exec::read_processes();
  const auto gpu = gpu_memory_by_process();  // nullopt: no NVML (no GPU, no driver)
  for (const auto& s : sessions)
    for (const auto& c : s.commands) {
      Measured m;
      m.usage = exec::command_usage(processes, static_cast<pid_t>(c.pid), c.cgroup);
      if (gpu && !m.usage.pids.empty()) {
        m.gpu_bytes = 0;
        for (pid_t pid : m.usage.pids)
          if (auto it = gpu->find(pid); it != gpu->end() && m.gpu_bytes)
            m.gpu_bytes = it->second ? std::optional(*m.gpu_bytes + *it->second) : std::nullopt;
      }
      out[c.id] = std::move(m);
    }
  return out;
}

template <class T>
nlohmann::json or_null(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json session_json(const SessionRow& s, const std::map<std::int64_t, Measured>& measured = {}) {
  nlohmann::json commands = nlohmann::json::array();
  for (const auto& c : s.commands) {
    auto it = measured.find(c.id);
    const Measured m = it == measured.end() ? Measured{} : it->second;
    commands.push_back({{"command", c.command}, {"since", rfc3339(c.started)}, {"pid", c.pid},
                        {"cpu_seconds", or_null(m.usage.cpu_seconds)}, {"memory_bytes", or_null(m.usage.memory_bytes)},
                        {"gpu_memory_bytes", or_null(m.gpu_bytes)}});
  }
  return {{"session", s.id},       {"grant", s.grant_id}, {"peer", s.peer},         {"address", s.address},
          {"path", s.path},        {"services", s.services}, {"since", rfc3339(s.opened)}, {"provider_pid", s.pid},
          {"kicked", s.kicked},    {"commands", commands}, {"unlisted_commands", s.unlisted_commands}};
}

std::string age_text(TimePoint since, TimePoint now) {
  auto age = std::chrono::duration_cast<std::chrono::seconds>(now - since);
  return age.count() > 0 ? format_duration(age) : std::string("0s");
}

std::string cpu_text(const std::optional<double>& seconds) {
  if (!seconds) return "-";
  if (*seconds >= 60) return format_duration(std::chrono::seconds(static_cast<std::int64_t>(*seconds)));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fs", *seconds);
  return buf;
}

std::string bytes_text(const std::optional<std::uint64_t>& bytes) { return bytes ? exec::size_text(*bytes) : "-"; }

// The indented lines under a session: one per command.
void print_commands(const SessionRow& s, const std::map<std::int64_t, Measured>& measured, TimePoint now) {
  if (s.commands.empty() && s.unlisted_commands == 0) return;
  std::cout << "    " << std::setw(9) << "PID" << std::setw(10) << "FOR" << std::setw(10) << "CPU" << std::setw(11)
            << "MEM" << std::setw(11) << "GPU" << "COMMAND" << std::endl;
  for (const auto& c : s.commands) {
    const Measured& m = measured.at(c.id);
    std::string command = column(printable(c.command), 80);
    command.erase(command.find_last_not_of(' ') + 1);
    std::cout << "    " << std::setw(9) << c.pid << std::setw(10) << age_text(c.started, now) << std::setw(10)
              << cpu_text(m.usage.cpu_seconds) << std::setw(11) << bytes_text(m.usage.memory_bytes) << std::setw(11)
              << bytes_text(m.gpu_bytes) << command << std::endl;
  }
  if (s.unlisted_commands > 0)
    std::cout << "    and " << s.unlisted_commands << " more command" << (s.unlisted_commands == 1 ? "" : "s")
              << " (at most " << kMaxSessionCommands << " are listed per session)" << std::endl;
}

int list_sessions(bool json) {
  auto db = open_database();
  if (!db) return report(db.error());
  SessionStore store(*db);
  auto live = store.live();
  if (!live) return report(live.error());
  const auto measured = measure(*live);
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& s : *live) out.push_back(session_json(s, measured));
    print_json(out);
    return 0;
  }
  if (live->empty()) {
    std::cout << "no live sessions" << std::endl;
    return 0;
  }
  auto now = SystemClock::instance().now();
  std::cout << std::left << std::setw(18) << "SESSION" << std::setw(12) << "LINK" << std::setw(14) << "PEER"
            << std::setw(24) << "ADDRESS" << std::setw(10) << "PATH" << std::setw(10) << "FOR" << "SERVICES" << std::endl;
  for (const auto& s : *live) {
    std::string services;
    for (const auto& name : s.services) services += (services.empty() ? "" : ",") + printable(name);
    std::cout << std::setw(18) << printable(s.id) << std::setw(12) << printable(s.grant_id) << std::setw(14)
              << printable(s.peer.substr(0, 12)) << std::setw(24) << printable(s.address) << std::setw(10)
              << printable(s.path) << std::setw(10) << age_text(s.opened, now)
              << (services.empty() ? "-" : services) << (s.kicked ? " (ending)" : "") << std::endl;
    print_commands(s, measured, now);
  }
  return 0;
}

int kick(const std::string& id, bool json) {
  auto db = open_database();
  if (!db) return report(db.error());
  SessionStore store(*db);
  auto kicked = store.kick(id);
  if (!kicked) return report(kicked.error());
  if (!*kicked) return report("no live session '" + printable(id) + "' (see `runsnack sessions`)");
  AuditLog audit(*db);
  AuditEvent ev;
  ev.time = SystemClock::instance().now();
  ev.kind = "kick";
  ev.grant_id = (*kicked)->grant_id;
  ev.peer = (*kicked)->peer;
  ev.address = (*kicked)->address;
  ev.detail = {{"session", id}};
  if (auto r = audit.append(ev); !r) return report(r.error());
  if (json) print_json(session_json(**kicked));
  else
    std::cout << "kicked session " << printable(id) << " (" << printable((*kicked)->peer.substr(0, 12)) << " on link "
              << printable((*kicked)->grant_id) << "): it ends within a second; the link stays valid "
              << "(`runsnack revoke " << printable((*kicked)->grant_id) << "` ends it)" << std::endl;
  return 0;
}

}  // namespace

void add_session_commands(CLI::App& app, ExitStatus& status) {
  auto json = std::make_shared<bool>(false);
  auto* sessions = app.add_subcommand(
      "sessions", "Who is connected now: live sessions on this machine's links, and the commands each runs (CPU, memory, GPU memory)");
  sessions->add_flag("--json", *json,
                     "One JSON array: session, grant, peer, address, path, services, since, provider_pid, kicked, "
                     "commands (command, since, pid, cpu_seconds, memory_bytes, gpu_memory_bytes; null when "
                     "unknown), unlisted_commands");
  sessions->callback([&status, json] { run_command(status, [&] { return list_sessions(*json); }); });

  struct KickArgs { std::string id; bool json = false; };
  auto ka = std::make_shared<KickArgs>();
  auto* k = app.add_subcommand("kick", "End one live session now (audited); its link stays valid");
  k->add_option("SESSION", ka->id, "The session's id, as `runsnack sessions` shows it")->required();
  k->add_flag("--json", ka->json, "Print the kicked session as JSON");
  k->callback([&status, ka] { run_command(status, [&] { return kick(ka->id, ka->json); }); });
}

}  // namespace runsnack::cli
