#pragma once
// `runsnack share`'s arguments and the link it makes: the grant stored from
// the command line's terms, the link text, and `share` through the service
// that serves the machine's state (cmd_share.cpp serves links itself).

#include "cli/serving_notice.hpp"
#include "core/error.hpp"
#include "crypto/peer_id.hpp"
#include "link/endpoint.hpp"
#include "link/grant.hpp"
#include "services/forward/forward_target.hpp"
#include "store/database.hpp"

#include <nlohmann/json.hpp>

#include "provider/admission.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace runsnack::cli {

struct ShareArgs {
  std::string gpus;
  std::string expires;
  std::int64_t max_uses = 0;  // consumers (link/grant.hpp); 0: any number
  std::int64_t max_sessions = 0;
  // This provider's sessions at once, over all links (provider/admission.hpp SessionLimits).
  std::int64_t total_sessions = SessionLimits{}.total;
  std::int64_t sessions_per_address = SessionLimits{}.per_address;
  bool bind_first = false;
  std::string port_range;
  std::string listen = "0.0.0.0";
  std::string label;
  bool public_label = false;
  std::string allow;
  bool serve_only = false;
  bool json = false;
  bool no_qr = false;
  // run/shell/cp limits, stored in grant.terms["run"] (sandbox/run_terms.hpp)
  std::string run_timeout, memory, disk_quota, max_transfer;
  bool memory_per_process = false;  // --memory may be per process (rlimits) where no cgroup holds a total
  std::int64_t max_procs = 0;
  bool network = false;
  double cpu_hours = -1, gpu_hours = -1;  // usage budgets (services/exec/usage_budget.hpp); <0: none
  std::vector<std::string> expose;  // forward targets (services/forward/forward_target.hpp)
  bool ollama = false;
  std::string bandwidth;
  std::int64_t max_connections = 0;
  std::string rendezvous;
  bool no_port_mapping = false;
  std::string service_sets;  // options given that the service decides for itself (share_through_service)
};

// A new link's lifetime without --expires (`--expires never`: none), so that
// forgotten links do not pile up.
inline constexpr const char* kDefaultLinkLifetime = "24h";

// --rendezvous, else RUNSNACK_RENDEZVOUS, else {"rendezvous": "HOST:PORT"} in `state`/config.json;
// empty when none.
Result<std::string> rendezvous_setting(const std::string& flag, const std::filesystem::path& state);

// A new grant from the command line's terms; the secret is only in the link.
struct NewGrant {
  Grant grant;
  std::string secret;
  ForwardTerms forward;
};

// Checks the terms (--expires, --allow, --expose, --ollama, limits) and stores the grant in `db`.
Result<NewGrant> create_grant(const ShareArgs& args, const std::vector<int>& gpus, Database& db);

// "expires TIME" (saying when it is the default lifetime) or "never expires", for share's human output.
std::string expiry_note(const ShareArgs& args, const Grant& grant);

// What --max-uses counts, for share's human output: "for the first 3 consumers (people, counted by their
// key), each as often as they like", or "for any number of consumers".
std::string uses_note(const Grant& grant);

// The link on stdout (and its QR code on a terminal); its fields go into `ready` for --json.
void announce_link(const ShareArgs& args, const NewGrant& made, const std::string& text, nlohmann::json& ready);

// `share` when the machine's state applies (core/paths.hpp: root or group runsnack, RUNSNACK_HOME
// unset): the link is made in the database runsnack-share.service serves, with the service's
// addresses (serving_notice.hpp), and the command returns; it never listens nor reads the
// service's key. Fails with what to do when the service is not running.
// The link made in this state's database for `serving`, the share that serves it (one provider per
// state: a second `share` does not listen again), said to be `who`; `settings_hint` says where that
// share's listening settings are chosen.
int share_through(const ShareArgs& args, const std::vector<int>& gpus, const ServingShare& serving,
                  const std::string& who, const std::string& settings_hint);
int share_through_service(const ShareArgs& args, const std::vector<int>& gpus);

}  // namespace runsnack::cli
