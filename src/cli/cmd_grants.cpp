// `runsnack links`, `runsnack revoke`, `runsnack log`: the provider's view of
// the grants it made and of everything that happened to them.
#include "cli/command.hpp"
#include "cli/state.hpp"
#include "core/clock.hpp"
#include "core/duration.hpp"
#include "core/printable.hpp"
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

int prune_log(bool json, const std::string& older_than, std::int64_t keep) {
  std::optional<TimePoint> before;
  if (!older_than.empty()) {
    auto d = parse_duration(older_than);
    if (!d) return report(fail(errc::invalid_argument, "--older-than takes a duration, e.g. 30d, 12h"));
    before = SystemClock::instance().now() - *d;
  }
  if (!before && keep < 0)
    return report(fail(errc::invalid_argument, "--prune needs --older-than DURATION and/or --keep ROWS"));
  auto db = open_database();
  if (!db) return report(db.error());
  AuditLog audit(*db);
  auto gone = audit.prune(before, keep >= 0 ? std::optional<std::int64_t>(keep) : std::nullopt);
  if (!gone) return report(gone.error());
  auto left = audit.count();
  if (!left) return report(left.error());
  if (json) print_json({{"pruned", *gone}, {"kept", *left}});
  else std::cout << "pruned " << *gone << " audit records; " << *left << " kept" << std::endl;
  return 0;
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
    // Peer-made text (reasons, addresses a relay reported) is shown escaped.
    std::cout << rfc3339(ev.time) << "  " << std::left << std::setw(14) << printable(ev.kind) << " grant="
              << (ev.grant_id.empty() ? "-" : printable(ev.grant_id))
              << " peer=" << (ev.peer.empty() ? "-" : printable(ev.peer.substr(0, 12)))
              << " from=" << (ev.address.empty() ? "-" : printable(ev.address));
    if (!ev.decision.empty()) std::cout << " " << printable(ev.decision);
    if (!ev.reason.empty()) std::cout << " (" << printable(ev.reason) << ")";
    if (!ev.detail.is_null() && !ev.detail.empty())
      std::cout << " " << ev.detail.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
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

  struct LogArgs {
    bool json = false, prune = false;
    std::string since, older_than;
    std::size_t limit = 1000;
    std::int64_t keep = -1;
  };
  auto lg = std::make_shared<LogArgs>();
  auto* log = app.add_subcommand("log", "The audit log: every connection attempt, decision and service used");
  log->add_flag("--json", lg->json, "One JSON object per line (with --prune: {\"pruned\":N,\"kept\":N})");
  log->add_option("--since", lg->since, "Only events newer than this (e.g. 10m, 2h, 1d)");
  log->add_option("--limit", lg->limit, "At most this many events (newest kept)")->capture_default_str();
  log->add_flag("--prune", lg->prune, "Delete old records instead of showing them (with --older-than and/or --keep)");
  log->add_option("--older-than", lg->older_than, "With --prune: delete records older than this (e.g. 30d)");
  log->add_option("--keep", lg->keep, "With --prune: keep only the newest this many records")->check(CLI::NonNegativeNumber);
  log->footer("Refusals before a peer proved anything (garbage, stalled or wrong-secret connections) are\n"
              "aggregated: the first from an address at once, the rest of each minute as one record whose\n"
              "detail has the count. `runsnack share` keeps 90 days and at most 100000 records.");
  log->callback([&status, lg] {
    run_command(status, [&] {
      if (lg->prune) return prune_log(lg->json, lg->older_than, lg->keep);
      if (!lg->older_than.empty() || lg->keep >= 0) return report(fail(errc::invalid_argument, "--older-than and --keep go with --prune"));
      return show_log(lg->json, lg->since, lg->limit);
    });
  });
}

}  // namespace runsnack::cli
