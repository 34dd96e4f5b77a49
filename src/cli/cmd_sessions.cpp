// `runsnack sessions`: who is connected right now, to the links of this
// machine; `runsnack kick SESSION`: end one session (the link stays valid).
// Both read the sessions table the providers keep (store/session_store.hpp).
#include "cli/command.hpp"
#include "cli/state.hpp"
#include "core/clock.hpp"
#include "core/duration.hpp"
#include "core/printable.hpp"
#include "store/audit_log.hpp"
#include "store/session_store.hpp"

#include <iomanip>
#include <iostream>

namespace runsnack::cli {

namespace {

nlohmann::json session_json(const SessionRow& s) {
  return {{"session", s.id},       {"grant", s.grant_id}, {"peer", s.peer},         {"address", s.address},
          {"path", s.path},        {"services", s.services}, {"since", rfc3339(s.opened)}, {"provider_pid", s.pid},
          {"kicked", s.kicked}};
}

int list_sessions(bool json) {
  auto db = open_database();
  if (!db) return report(db.error());
  SessionStore store(*db);
  auto live = store.live();
  if (!live) return report(live.error());
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& s : *live) out.push_back(session_json(s));
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
    auto age = std::chrono::duration_cast<std::chrono::seconds>(now - s.opened);
    std::string services;
    for (const auto& name : s.services) services += (services.empty() ? "" : ",") + printable(name);
    std::cout << std::setw(18) << printable(s.id) << std::setw(12) << printable(s.grant_id) << std::setw(14)
              << printable(s.peer.substr(0, 12)) << std::setw(24) << printable(s.address) << std::setw(10)
              << printable(s.path) << std::setw(10) << (age.count() > 0 ? format_duration(age) : std::string("0s"))
              << (services.empty() ? "-" : services) << (s.kicked ? " (ending)" : "") << std::endl;
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
  auto* sessions = app.add_subcommand("sessions", "Who is connected now: live sessions on this machine's links");
  sessions->add_flag("--json", *json,
                     "One JSON array: session, grant, peer, address, path, services, since, provider_pid, kicked");
  sessions->callback([&status, json] { run_command(status, [&] { return list_sessions(*json); }); });

  struct KickArgs { std::string id; bool json = false; };
  auto ka = std::make_shared<KickArgs>();
  auto* k = app.add_subcommand("kick", "End one live session now (audited); its link stays valid");
  k->add_option("SESSION", ka->id, "The session's id, as `runsnack sessions` shows it")->required();
  k->add_flag("--json", ka->json, "Print the kicked session as JSON");
  k->callback([&status, ka] { run_command(status, [&] { return kick(ka->id, ka->json); }); });
}

}  // namespace runsnack::cli
