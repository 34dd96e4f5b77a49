// `runsnack links`, `runsnack revoke`, `runsnack log`: the provider's view of
// the grants it made and of everything that happened to them.
#include "cli/command.hpp"
#include "cli/state.hpp"
#include "core/clock.hpp"
#include "core/duration.hpp"
#include "store/audit_log.hpp"
#include "store/grant_store.hpp"

#include <iomanip>
#include <iostream>

namespace runsnack::cli {

namespace {

std::string or_dash(const nlohmann::json& v) {
  if (v.is_null()) return "-";
  return v.is_string() ? v.get<std::string>() : v.dump();
}

int list_links(bool json, bool all) {
  auto db = open_database();
  if (!db) return report(db.error());
  GrantStore grants(*db);
  auto list = grants.list(all);
  if (!list) return report(list.error());
  auto now = SystemClock::instance().now();
  nlohmann::json out = nlohmann::json::array();
  for (const auto& g : *list) out.push_back(grant_terms(g, now));
  if (json) {
    print_json(out);
    return 0;
  }
  if (out.empty()) {
    std::cout << "no " << (all ? "" : "active ") << "links (make one with `runsnack share`)" << std::endl;
    return 0;
  }
  std::cout << std::left << std::setw(12) << "ID" << std::setw(9) << "STATE" << std::setw(10) << "USES"
            << std::setw(10) << "SESSIONS" << std::setw(22) << "EXPIRES" << "SERVICES" << std::endl;
  for (const auto& g : out) {
    std::string uses = std::to_string(g["uses"].get<std::int64_t>()) + "/" + or_dash(g["max_uses"]);
    std::string services;
    for (const auto& s : g["services"]) services += (services.empty() ? "" : ",") + s.get<std::string>();
    std::cout << std::setw(12) << g["id"].get<std::string>() << std::setw(9) << g["state"].get<std::string>()
              << std::setw(10) << uses << std::setw(10) << or_dash(g["max_sessions"]) << std::setw(22)
              << or_dash(g["expires"]) << services << std::endl;
  }
  return 0;
}

int revoke(const std::string& id) {
  auto db = open_database();
  if (!db) return report(db.error());
  GrantStore grants(*db);
  auto done = grants.revoke(id);
  if (!done) return report(done.error());
  if (!*done) return report("no link with id '" + id + "' (see `runsnack links --all`)");
  AuditLog audit(*db);
  AuditEvent ev;
  ev.time = SystemClock::instance().now();
  ev.kind = "revoke";
  ev.grant_id = id;
  (void)audit.append(ev);
  std::cout << "revoked " << id << ": new connections are refused and live sessions end within a second"
            << std::endl;
  return 0;
}

Result<std::optional<TimePoint>> parse_since(const std::string& since) {
  if (since.empty()) return std::optional<TimePoint>{};
  auto d = parse_duration(since);
  if (!d) return fail(errc::invalid_argument, "--since takes a duration back from now, e.g. 10m, 2h, 1d");
  return std::optional<TimePoint>(SystemClock::instance().now() - *d);
}

int show_log(bool json, const std::string& since, std::size_t limit) {
  auto from = parse_since(since);
  if (!from) return report(from.error());
  auto db = open_database();
  if (!db) return report(db.error());
  AuditLog audit(*db);
  auto events = audit.query(*from, limit);
  if (!events) return report(events.error());
  for (const auto& ev : *events) {
    if (json) {
      print_json(to_json(ev));
      continue;
    }
    std::cout << rfc3339(ev.time) << "  " << std::left << std::setw(14) << ev.kind << " grant="
              << (ev.grant_id.empty() ? "-" : ev.grant_id) << " peer=" << (ev.peer.empty() ? "-" : ev.peer.substr(0, 12))
              << " from=" << (ev.address.empty() ? "-" : ev.address);
    if (!ev.decision.empty()) std::cout << " " << ev.decision;
    if (!ev.reason.empty()) std::cout << " (" << ev.reason << ")";
    if (!ev.detail.is_null() && !ev.detail.empty()) std::cout << " " << ev.detail.dump();
    std::cout << std::endl;
  }
  return 0;
}

}  // namespace

void add_grant_commands(CLI::App& app, ExitStatus& status) {
  struct LinksArgs { bool json = false, all = false; };
  auto la = std::make_shared<LinksArgs>();
  auto* links = app.add_subcommand("links", "List the links this machine has shared: uses, sessions, expiry");
  links->add_flag("--json", la->json, "One JSON array of grants");
  links->add_flag("--all", la->all, "Include revoked, expired and used-up links");
  links->callback([&status, la] { run_command(status, [&] { return list_links(la->json, la->all); }); });

  auto id = std::make_shared<std::string>();
  auto* rev = app.add_subcommand("revoke", "Kill a link now: refuse new connections and end its live sessions");
  rev->add_option("GRANT-ID", *id, "The link's id, as `runsnack links` shows it")->required();
  rev->callback([&status, id] { run_command(status, [&] { return revoke(*id); }); });

  struct LogArgs { bool json = false; std::string since; std::size_t limit = 1000; };
  auto lg = std::make_shared<LogArgs>();
  auto* log = app.add_subcommand("log", "The audit log: every connection attempt, decision and service used");
  log->add_flag("--json", lg->json, "One JSON object per line");
  log->add_option("--since", lg->since, "Only events newer than this (e.g. 10m, 2h, 1d)");
  log->add_option("--limit", lg->limit, "At most this many events (newest kept)")->capture_default_str();
  log->callback([&status, lg] { run_command(status, [&] { return show_log(lg->json, lg->since, lg->limit); }); });
}

}  // namespace runsnack::cli
