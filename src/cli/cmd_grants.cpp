// `runsnack links`, `runsnack revoke`, `runsnack log`: the provider's view of
// the grants it made and of everything that happened to them.
#include "cli/audit_view.hpp"
#include "cli/command.hpp"
#include "cli/serving_notice.hpp"
#include "cli/state.hpp"
#include "cli/text_column.hpp"
#include "core/clock.hpp"
#include "core/duration.hpp"
#include "core/printable.hpp"
#include "store/audit_log.hpp"
#include "store/grant_store.hpp"
#include "store/session_store.hpp"
#include "link/link.hpp"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>

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
  SessionStore sessions(*db);
  auto live = sessions.live();
  if (!live) return report(live.error());
  std::map<std::string, std::int64_t> live_by_grant;
  for (const auto& s : *live) ++live_by_grant[s.grant_id];
  // Where they are served: every live link of this state by the one share that serves it.
  auto dir = state_dir();
  if (!dir) return report(dir.error());
  auto serving = find_serving_share(*dir);
  if (!serving) return report(serving.error());
  const nlohmann::json served_by = *serving ? nlohmann::json{{"pid", (*serving)->pid}, {"listen", (*serving)->listen}}
                                            : nlohmann::json(nullptr);
  auto now = SystemClock::instance().now();
  nlohmann::json out = nlohmann::json::array();
  for (const auto& g : *list) {
    out.push_back(grant_terms(g, now));
    out.back()["live_sessions"] = live_by_grant[g.id];
    out.back()["served_by"] = out.back()["state"] == "active" ? served_by : nlohmann::json(nullptr);
  }
  if (json) {
    print_json(out);
    return 0;
  }
  if (out.empty()) {
    std::cout << "no " << (all ? "" : "active ") << "links (make one with `runsnack share`)" << std::endl;
    return 0;
  }
  // CONSUMERS: the people (keys) that used the link, of --max-uses; LEFT: how many more it takes.
  // One word per cell, as wide as the widest (--max-uses goes up to 7 digits).
  auto consumers_text = [](const nlohmann::json& g) {
    return std::to_string(g["uses"].get<std::int64_t>()) + "/" +
           (g["max_uses"].is_null() ? std::string("unlim.") : or_dash(g["max_uses"]));
  };
  std::size_t consumers_width = std::string("CONSUMERS").size() + 2, left_width = std::string("LEFT").size() + 2;
  for (const auto& g : out) {
    consumers_width = std::max(consumers_width, consumers_text(g).size() + 2);
    left_width = std::max(left_width, or_dash(g["uses_left"]).size() + 2);
  }
  std::cout << std::left << std::setw(12) << "ID" << std::setw(9) << "STATE" << std::setw(consumers_width) << "CONSUMERS"
            << std::setw(left_width) << "LEFT" << std::setw(8) << "CONNS" << std::setw(10) << "SESSIONS"
            << std::setw(22) << "EXPIRES" << column("LABEL", 24) << "SERVICES" << std::endl;
  for (const auto& g : out) {
    std::string live_text = std::to_string(g["live_sessions"].get<std::int64_t>());
    if (!g["max_sessions"].is_null()) live_text += "/" + or_dash(g["max_sessions"]);
    std::string services;
    for (const auto& s : g["services"]) services += (services.empty() ? "" : ",") + s.get<std::string>();
    std::string label = g["label"].get<std::string>();
    std::cout << std::setw(12) << g["id"].get<std::string>() << std::setw(9) << g["state"].get<std::string>()
              << std::setw(consumers_width) << consumers_text(g) << std::setw(left_width) << or_dash(g["uses_left"])
              << std::setw(8) << or_dash(g["connections"])
              << std::setw(10) << live_text << std::setw(22)
              << (g["expires"].is_null() ? std::string("never") : g["expires"].get<std::string>())
              << column(label.empty() ? "-" : printable(label), 24) << services << std::endl;
  }
  if (*serving)
    std::cout << "served by `runsnack share` (pid " << (*serving)->pid << ") on " << printable((*serving)->listen)
              << " as " << (*serving)->peer.str() << std::endl;
  else
    std::cout << "not served now: consumers cannot connect until `runsnack share --serve-only` (or a new `share`) runs"
              << std::endl;
  return 0;
}

// A pasted link (never printed: it holds the secret) or a grant id -> the grant id.
Result<std::string> grant_id_of(const std::string& arg) {
  if (arg.find("://") == std::string::npos && arg.find("#k=") == std::string::npos) return arg;
  auto link = parse_link(arg);
  if (!link) return fail(errc::invalid_argument, "an argument looks like a link but does not parse (not shown: it may hold "
                                                 "a secret); give the link's id from `runsnack links` instead");
  return link->grant_id;
}

Result<void> revoke_one(Database& db, const std::string& id) {
  GrantStore grants(db);
  auto done = grants.revoke(id);
  if (!done) return done.error();
  if (!*done) return fail(errc::not_found, "no link with id '" + printable(id) + "' (see `runsnack links --all`)");
  AuditLog audit(db);
  AuditEvent ev;
  ev.time = SystemClock::instance().now();
  ev.kind = "revoke";
  ev.grant_id = id;
  (void)audit.append(ev);
  return {};
}

// `runsnack revoke ID|LINK|- ...` or `--all`: every one that can be is revoked; exit 1 if any could not.
int revoke(std::vector<std::string> args, bool all, bool json) {
  if (all && !args.empty()) return report("give link ids or --all, not both");
  if (!all && args.empty()) return report("give the ids of the links to revoke (see `runsnack links`), a pasted link, '-' "
                                          "to read them from stdin, or --all");
  std::vector<std::string> ids;
  std::vector<std::string> errors;
  auto db = open_database();
  if (!db) return report(db.error());
  if (all) {
    GrantStore grants(*db);
    auto list = grants.list(false);
    if (!list) return report(list.error());
    for (const auto& g : *list) ids.push_back(g.id);
  }
  for (const auto& arg : args) {
    if (arg == "-") {
      std::string line;
      for (int n = 0; n < 10000 && std::getline(std::cin, line); ++n) {
        while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
        if (line.empty()) continue;
        if (auto id = grant_id_of(line)) ids.push_back(*id);
        else errors.push_back(id.error().what());
      }
      continue;
    }
    if (auto id = grant_id_of(arg)) ids.push_back(*id);
    else errors.push_back(id.error().what());
  }
  std::set<std::string> seen;
  nlohmann::json revoked = nlohmann::json::array();
  for (const auto& id : ids) {
    if (!seen.insert(id).second) continue;
    if (auto r = revoke_one(*db, id); !r) errors.push_back(r.error().what());
    else revoked.push_back(id);
  }
  if (json) {
    print_json({{"revoked", revoked}, {"errors", errors}});
  } else {
    for (const auto& id : revoked)
      std::cout << "revoked " << id.get<std::string>() << std::endl;
    if (!revoked.empty()) std::cout << "new connections are refused and live sessions end within a second" << std::endl;
    else if (all) std::cout << "no active links to revoke" << std::endl;
  }
  for (const auto& e : errors) report(e);
  return errors.empty() ? 0 : kExitFailure;
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

// "2h" (back from now), "2026-12-08", "2026-12-08T14:30" or "2026-12-08 14:30:05" (local time).
Result<std::optional<TimePoint>> parse_when(const std::string& flag, const std::string& text) {
  if (text.empty()) return std::optional<TimePoint>{};
  if (auto d = parse_duration(text)) return std::optional<TimePoint>(SystemClock::instance().now() - *d);
  for (const char* format : {"%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%d"}) {
    std::tm tm{};
    tm.tm_isdst = -1;
    const char* end = strptime(text.c_str(), format, &tm);
    if (end == nullptr || *end != '\0') continue;
    const std::time_t t = std::mktime(&tm);
    if (t == static_cast<std::time_t>(-1)) break;
    return std::optional<TimePoint>(std::chrono::system_clock::from_time_t(t));
  }
  return fail(errc::invalid_argument,
              flag + " takes a duration back from now (10m, 2h, 1d) or a local date and time (2026-12-08, 2026-12-08T14:30)");
}

// More than the provider keeps (provider.hpp kAuditKeepRows): a log grown by
// `--keep` or an older version is read to this bound, newest first.
constexpr std::size_t kAuditMostRecordsRead = 200'000;

struct LogArgs {
  bool json = false, prune = false, events = false, utc = false;
  std::string since, until, older_than;
  AuditFilter filter;
  std::size_t limit = 1000;
  std::int64_t keep = -1;
};

int show_log(const LogArgs& args) {
  auto from = parse_when("--since", args.since);
  if (!from) return report(from.error());
  auto until = parse_when("--until", args.until);
  if (!until) return report(until.error());
  AuditFilter filter = args.filter;
  filter.until = *until;
  auto db = open_database();
  if (!db) return report(db.error());
  AuditLog audit(*db);
  // Every record the provider keeps (it prunes to kAuditKeepRows): lines are
  // made of records from anywhere in the range.
  auto records = audit.query(*from, kAuditMostRecordsRead);
  if (!records) return report(records.error());
  std::vector<AuditLine> lines;
  for (auto& line : audit_lines(*records))
    if (matches(line, *records, filter)) lines.push_back(std::move(line));
  if (args.json || args.events) {
    // The records themselves, everything in them, of the lines that matched.
    std::vector<std::size_t> picked;
    for (const auto& line : lines) picked.insert(picked.end(), line.records.begin(), line.records.end());
    std::sort(picked.begin(), picked.end());
    picked.erase(std::unique(picked.begin(), picked.end()), picked.end());
    if (picked.size() > args.limit) picked.erase(picked.begin(), picked.end() - static_cast<std::ptrdiff_t>(args.limit));
    for (std::size_t i : picked) {
      const AuditEvent& ev = (*records)[i];
      if (args.json) {
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
        std::cout << " " << printable(ev.detail.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      std::cout << std::endl;
    }
    return 0;
  }
  if (lines.size() > args.limit) lines.erase(lines.begin(), lines.end() - static_cast<std::ptrdiff_t>(args.limit));
  GrantStore grants(*db);
  auto known = grants.list(true);
  if (!known) return report(known.error());
  std::map<std::string, std::string> labels;
  for (const auto& g : *known) labels[g.id] = g.label;
  if (lines.empty()) std::cout << "nothing in the audit log" << (args.since.empty() && args.until.empty() ? "" : " in that time")
                               << (filter.grant_id.empty() && filter.peer.empty() && filter.kind.empty() ? "" : " that matches")
                               << std::endl;
  for (const auto& line : lines) std::cout << audit_line_text(line, labels[line.grant_id], args.utc) << std::endl;
  return 0;
}

}  // namespace

void add_grant_commands(CLI::App& app, ExitStatus& status) {
  struct LinksArgs { bool json = false, all = false; };
  auto la = std::make_shared<LinksArgs>();
  auto* links = app.add_subcommand(
      "links", "List the links this machine has shared: consumers and how many more it takes, connections, live "
               "sessions, expiry, label");
  links->add_flag("--json", la->json,
                  "One JSON array of grants (uses: consumers so far, of max_uses; uses_left; connections; served_by: {pid, listen} of the share serving an active link, null when none does)");
  links->add_flag("--all", la->all, "Include revoked and expired links");
  links->footer("CONSUMERS: the people (counted by their key) who have used the link, of `share --max-uses`;\n"
                "LEFT: how many more it takes (a full link still lets its consumers in). CONNS: connections so far.");
  links->callback([&status, la] { run_command(status, [&] { return list_links(la->json, la->all); }); });

  struct RevokeArgs { std::vector<std::string> ids; bool all = false, json = false; };
  auto ra = std::make_shared<RevokeArgs>();
  auto* rev = app.add_subcommand("revoke", "Kill links now: refuse new connections and end their live sessions");
  rev->add_option("LINK-ID", ra->ids,
                  "Ids as `runsnack links` shows them, pasted links (never printed back), or '-' to read them from stdin");
  rev->add_flag("--all", ra->all, "Revoke every active link");
  rev->add_flag("--json", ra->json, "Print {\"revoked\": [ids], \"errors\": [messages]}");
  rev->callback([&status, ra] { run_command(status, [&] { return revoke(ra->ids, ra->all, ra->json); }); });

  auto lg = std::make_shared<LogArgs>();
  auto* log = app.add_subcommand(
      "log", "The audit log: every session, command, refusal, kick and revocation, one line each (newest last)");
  log->add_flag("--json", lg->json,
                "The records themselves, everything in them: one JSON object per line (with --prune: "
                "{\"pruned\":N,\"kept\":N})");
  log->add_flag("--events", lg->events, "The records themselves as text, one per line, as stored (UTC)");
  log->add_option("--since", lg->since, "Only what began after this: a duration back from now (10m, 2h, 1d) or a local "
                                        "date and time (2026-12-08, 2026-12-08T14:30)");
  log->add_option("--until", lg->until, "Only what began before this (same forms as --since)");
  log->add_option("--link", lg->filter.grant_id, "Only this link's (its id, as `runsnack links` shows it)");
  log->add_option("--peer", lg->filter.peer, "Only this consumer's (its peer id or the start of it)");
  log->add_option("--kind", lg->filter.kind,
                  "Only lines of this kind: session, run, shell, cuda, refused, kick, revoke, or a record's kind "
                  "(auth, sync, run_end, ...)");
  log->add_flag("--utc", lg->utc, "Times in UTC (default: this machine's local time)");
  log->add_option("--limit", lg->limit, "At most this many lines (newest kept; with --json or --events: records)")
      ->capture_default_str();
  log->add_flag("--prune", lg->prune, "Delete old records instead of showing them (with --older-than and/or --keep)");
  log->add_option("--older-than", lg->older_than, "With --prune: delete records older than this (e.g. 30d)");
  log->add_option("--keep", lg->keep, "With --prune: keep only the newest this many records")->check(kNonNegativeNumber);
  log->footer("A line: local time, the consumer's peer id, the link (and its label), the kind, what (the command,\n"
              "or the services a session used and what it sent), -> how it ended, [duration, CPU, peak memory or\n"
              "bytes in and out], the address. A `run` is two lines: its session and its command.\n"
              "Refusals before a peer proved anything (garbage, stalled or wrong-secret connections) are\n"
              "aggregated: the first from an address at once, the rest of each minute as one record whose\n"
              "detail has the count. `runsnack share` keeps 90 days and at most 100000 records.");
  log->callback([&status, lg] {
    run_command(status, [&] {
      if (lg->prune) return prune_log(lg->json, lg->older_than, lg->keep);
      if (!lg->older_than.empty() || lg->keep >= 0) return report(fail(errc::invalid_argument, "--older-than and --keep go with --prune"));
      return show_log(*lg);
    });
  });
}

}  // namespace runsnack::cli
