#pragma once
// The coordinator's address and links, kept across restarts (issue 16):
// `pool serve` stores the address it listens on and its join and submit
// links' grants (with their secrets: pool-serve.json in the state folder,
// readable by its owner only) and, unless --listen says otherwise, listens
// on the same address and prints the same links again, so workers and
// submitters reconnect by themselves. `pool link` makes further links for
// that address (a submit link may carry credits), `pool grant` mints credits
// for a peer: the only two ways credits come into a pool.

#include "cli/command.hpp"
#include "core/error.hpp"
#include "crypto/identity.hpp"
#include "link/endpoint.hpp"
#include "pool/pool_store.hpp"
#include "store/database.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace runsnack::cli {

struct SavedLink {
  std::string grant, secret;
};

struct PoolServeState {
  std::string listen;  // ADDR:PORT as bound last time
  std::optional<Endpoint> rendezvous;  // the rendezvous it registered at last time (`pool link` names it)
  std::optional<SavedLink> join, submit;
};

Result<std::optional<PoolServeState>> load_pool_serve_state();
Result<void> save_pool_serve_state(const PoolServeState& state);

// `saved` when its grant is still active (not revoked, not expired), else a
// new grant for `service`; `saved` is updated to what the link uses.
Result<SavedLink> reuse_or_make_grant(Database& db, std::optional<SavedLink>& saved, const char* service,
                                      const char* label);

// The coordinator's store named by --db: "sqlite:PATH" (default pool.db in the state folder) or a
// postgres:// URL; `shown` gets it without secrets. `must_exist`: a missing SQLite file is an error.
Result<pool::PoolStore> open_pool_store(const std::string& db, const pool::PoolPolicy& policy, std::string& shown,
                                        bool must_exist);

// pool grant, pool link.
void add_pool_bank_commands(CLI::App& pool, ExitStatus& status);

}  // namespace runsnack::cli
