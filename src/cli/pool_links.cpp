#include "cli/pool_links.hpp"

#include "cli/state.hpp"
#include "crypto/secret.hpp"
#include "link/link.hpp"
#include "net/listener.hpp"
#include "provider/host.hpp"
#include "pool/coordinator.hpp"
#include "pool/ledger_rules.hpp"
#include "pool/pool_store.hpp"
#include "pool/replication.hpp"
#include "store/grant_store.hpp"

#include <boost/asio/ip/address.hpp>

#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include <sys/stat.h>

namespace runsnack::cli {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kStateFile = "pool-serve.json";

bool is_postgres_url(const std::string& db) {
  return db.rfind("postgres://", 0) == 0 || db.rfind("postgresql://", 0) == 0;
}

// "--db sqlite:PATH" (or a bare path); default pool.db in the state folder.
Result<fs::path> pool_db_path(const std::string& db) {
  if (db.empty()) return state_path("pool.db");
  if (db.rfind("sqlite:", 0) == 0 && db.size() > 7) return fs::path(db.substr(7));
  return fail(errc::invalid_argument, "bad --db '" + db + "': expected sqlite:PATH or postgres://...");
}

std::optional<SavedLink> link_of(const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_object()) return std::nullopt;
  const json& l = j[key];
  if (!l.contains("grant") || !l["grant"].is_string() || !l.contains("secret") || !l["secret"].is_string()) return std::nullopt;
  return SavedLink{l["grant"].get<std::string>(), l["secret"].get<std::string>()};
}

}  // namespace

// The store named by --db: SQLite (default) or PostgreSQL.
Result<pool::PoolStore> open_pool_store(const std::string& db, const pool::PoolPolicy& policy, std::string& shown,
                                        bool must_exist) {
  if (is_postgres_url(db)) {
    shown = db.substr(0, db.find('?'));
    return pool::PoolStore::open_postgres(db, policy);
  }
  auto path = pool_db_path(db);
  if (!path) return path.error();
  if (must_exist && !fs::exists(*path))
    return fail(errc::not_found, "no pool database at " + path->string() + " (run on the coordinator's machine)");
  shown = "sqlite:" + path->string();
  return pool::PoolStore::open(*path, policy);
}

Result<std::optional<PoolServeState>> load_pool_serve_state() {
  auto path = state_path(kStateFile);
  if (!path) return path.error();
  std::ifstream in(*path);
  if (!in) return std::optional<PoolServeState>{};
  std::stringstream ss;
  ss << in.rdbuf();
  auto j = json::parse(ss.str(), nullptr, false);
  if (!j.is_object()) return fail(errc::malformed, path->string() + " is not the coordinator's saved state (JSON object)");
  PoolServeState s;
  if (j.contains("listen") && j["listen"].is_string()) s.listen = j["listen"].get<std::string>();
  if (j.contains("rendezvous") && j["rendezvous"].is_string()) {
    auto rendezvous = parse_endpoint(j["rendezvous"].get<std::string>(), "rendezvous");
    if (!rendezvous) return fail(errc::malformed, path->string() + ": " + rendezvous.error().what());
    s.rendezvous = *rendezvous;
  }
  s.join = link_of(j, "join");
  s.submit = link_of(j, "submit");
  return std::optional<PoolServeState>(std::move(s));
}

Result<void> save_pool_serve_state(const PoolServeState& state) {
  auto path = state_path(kStateFile);
  if (!path) return path.error();
  json j = {{"listen", state.listen}};
  if (state.rendezvous) j["rendezvous"] = state.rendezvous->str();
  if (state.join) j["join"] = {{"grant", state.join->grant}, {"secret", state.join->secret}};
  if (state.submit) j["submit"] = {{"grant", state.submit->grant}, {"secret", state.submit->secret}};
  const fs::path tmp = path->string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return fail(errc::io_error, "cannot write " + tmp.string());
    ::chmod(tmp.c_str(), 0600);  // link secrets: its owner's only
    out << j.dump(2) << "\n";
    if (!out) return fail(errc::io_error, "cannot write " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, *path, ec);
  if (ec) return fail(errc::io_error, "cannot write " + path->string() + ": " + ec.message());
  return {};
}

Result<SavedLink> reuse_or_make_grant(Database& db, std::optional<SavedLink>& saved, const char* service,
                                      const char* label) {
  GrantStore grants(db);
  if (saved) {
    auto g = grants.find(saved->grant);
    if (!g) return g.error();
    const bool live = *g && !(*g)->revoked && (!(*g)->expires || *(*g)->expires > std::chrono::system_clock::now()) &&
                      (*g)->services.count(service);
    if (live) return *saved;
  }
  Grant grant;
  grant.id = new_grant_id();
  const std::string secret = new_secret();
  grant.key = derive_grant_key(secret);
  grant.created = std::chrono::system_clock::now();
  grant.services.insert(service);
  grant.label = label;
  if (auto r = grants.create(grant); !r) return r.error();
  saved = SavedLink{grant.id, secret};
  return *saved;
}

namespace {

int grant_credits(const std::string& peer_text, const std::string& amount_text, const std::string& db, bool as_json) {
  auto peer = PeerId::parse(peer_text);
  if (!peer) return report("bad PEER '" + peer_text + "': a PeerId, as `runsnack id` prints it");
  auto amount = pool::parse_credits(amount_text);
  if (!amount) return report(amount.error());
  if (*amount <= 0) return report("a grant must be more than 0 credits");
  std::string shown;
  auto store = open_pool_store(db, {}, shown, true);
  if (!store) return report(store.error());
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count();
  if (auto r = store->grant_credits(peer->str(), *amount, now); !r) return report(r.error());
  auto balance = store->balance(pool::peer_account(peer->str()));
  if (!balance) return report(balance.error());
  if (as_json) {
    print_json({{"peer", peer->str()}, {"granted", pool::format_credits(*amount)}, {"balance", pool::format_credits(*balance)}});
  } else {
    std::cout << "granted " << pool::format_credits(*amount) << " credits to " << peer->str() << " (balance "
              << pool::format_credits(*balance) << ")" << std::endl;
  }
  return 0;
}

int trust_peer(const std::string& peer_text, bool remove, const std::string& db, bool as_json) {
  auto peer = PeerId::parse(peer_text);
  if (!peer) return report("bad PEER '" + peer_text + "': a PeerId, as `runsnack id` prints it on the worker");
  std::string shown;
  auto store = open_pool_store(db, {}, shown, true);
  if (!store) return report(store.error());
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count();
  if (auto r = store->trust_peer(peer->str(), !remove, now); !r) return report(r.error());
  if (as_json) {
    print_json({{"peer", peer->str()}, {"trusted", !remove}});
  } else if (remove) {
    std::cout << peer->str() << " is no longer trusted: its results verify quorums again only with a record of "
              << pool::kProvenChecks << " valid checks" << std::endl;
  } else {
    std::cout << peer->str() << " is trusted: a quorum it agrees with is verified (a running coordinator sees "
              << "this at its next quorum)" << std::endl;
  }
  return 0;
}

int make_pool_link(bool join, const std::string& credits_text, const std::string& db, bool as_json) {
  auto state = load_pool_serve_state();
  if (!state) return report(state.error());
  if (!*state || (*state)->listen.empty())
    return report("this coordinator has not run yet: start `runsnack pool serve` once, then make links");
  std::optional<pool::Micro> credits;
  if (!credits_text.empty()) {
    auto c = pool::parse_credits(credits_text);
    if (!c) return report(c.error());
    if (*c <= 0) return report("--credits must be more than 0");
    if (join) return report("--credits goes with a submit link (workers earn theirs)");
    credits = *c;
  }
  const std::string& listen = (*state)->listen;
  const auto colon = listen.rfind(':');
  boost::system::error_code ec;
  auto address = boost::asio::ip::make_address(listen.substr(0, colon), ec);
  if (ec || colon == std::string::npos) return report("the saved address '" + listen + "' does not parse");
  const auto port = static_cast<std::uint16_t>(std::stoul(listen.substr(colon + 1)));
  auto identity = open_identity();
  if (!identity) return report(identity.error());
  auto home = open_database();
  if (!home) return report(home.error());
  std::optional<pool::PoolStore> store;
  if (credits) {  // the store first: no link that promises credits it cannot carry
    std::string shown;
    auto s = open_pool_store(db, {}, shown, true);
    if (!s) return report(s.error());
    store.emplace(std::move(*s));
  }
  std::optional<SavedLink> fresh;
  auto grant = reuse_or_make_grant(*home, fresh, join ? pool::kServiceWorker : pool::kServiceClient,
                                   join ? "pool join" : "pool submit");
  if (!grant) return report(grant.error());
  if (credits)
    if (auto r = store->offer_link_credits(grant->grant, *credits); !r) return report(r.error());
  const std::string text =
      mint_link((*state)->rendezvous, local_candidates(boost::asio::ip::tcp::endpoint(address, port)), identity->peer_id(),
                grant->grant, grant->secret);
  if (as_json) {
    print_json({{"link", text}, {"grant", grant->grant}, {"kind", join ? "join" : "submit"},
                {"credits", pool::format_credits(credits.value_or(0))}});
  } else {
    std::cout << text << std::endl;
    std::cerr << (join ? "a join link" : "a submit link") << " (grant " << grant->grant << "; revoke with `runsnack revoke`)"
              << (credits ? "; it carries " + pool::format_credits(*credits) + " credits for the first peer that uses it" : "")
              << std::endl;
  }
  return 0;
}

}  // namespace

void add_pool_bank_commands(CLI::App& pool, ExitStatus& status) {
  struct GrantArgs {
    std::string peer, amount, db;
    bool json = false;
  };
  auto ga = std::make_shared<GrantArgs>();
  auto* grant_cmd = pool.add_subcommand(
      "grant", "Mint credits for a participant (on the coordinator). Credits come into a pool only this way or "
               "with a link made by `pool link --credits N`; a new identity starts with none");
  grant_cmd->add_option("peer", ga->peer, "The participant's PeerId (`runsnack id` prints it)")->required();
  grant_cmd->add_option("credits", ga->amount, "How many, e.g. 100 or 2.5")->required();
  grant_cmd->add_option("--db", ga->db, "sqlite:PATH or postgres://... (default: pool.db in the state folder)");
  grant_cmd->add_flag("--json", ga->json, "One JSON object");
  grant_cmd->callback([&status, ga] { run_command(status, [&] { return grant_credits(ga->peer, ga->amount, ga->db, ga->json); }); });

  struct TrustArgs {
    std::string peer, db;
    bool remove = false, json = false;
  };
  auto ta = std::make_shared<TrustArgs>();
  auto* trust_cmd = pool.add_subcommand(
      "trust", "Vouch for a worker you run (on the coordinator): replicated results it agrees with are verified. "
               "Otherwise a quorum verifies only with a device that has a record of valid checks (matmul, render "
               "or earlier quorums): two new identities never verify each other");
  trust_cmd->add_option("peer", ta->peer, "The worker's PeerId (`runsnack id` on that machine prints it)")->required();
  trust_cmd->add_flag("--remove", ta->remove, "Stop vouching for it");
  trust_cmd->add_option("--db", ta->db, "sqlite:PATH or postgres://... (default: pool.db in the state folder)");
  trust_cmd->add_flag("--json", ta->json, "One JSON object: {\"peer\", \"trusted\"}");
  trust_cmd->callback([&status, ta] { run_command(status, [&] { return trust_peer(ta->peer, ta->remove, ta->db, ta->json); }); });

  struct LinkArgs {
    std::string credits, db;
    bool join = false, json = false;
  };
  auto la = std::make_shared<LinkArgs>();
  auto* link_cmd = pool.add_subcommand(
      "link", "Make another submit link (or --join link) for this coordinator's address (on the coordinator)");
  link_cmd->add_option("--credits", la->credits,
                       "The link carries this many credits, minted once, for the first peer that uses it");
  link_cmd->add_flag("--join", la->join, "A join link for workers instead of a submit link");
  link_cmd->add_option("--db", la->db, "sqlite:PATH or postgres://... (default: pool.db in the state folder)");
  link_cmd->add_flag("--json", la->json, "One JSON object: {\"link\", \"grant\", \"kind\", \"credits\"}");
  link_cmd->callback([&status, la] { run_command(status, [&] { return make_pool_link(la->join, la->credits, la->db, la->json); }); });
}

}  // namespace runsnack::cli
