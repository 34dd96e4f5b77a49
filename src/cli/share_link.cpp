#include "cli/share_link.hpp"

#include "cli/command.hpp"
#include "cli/qr.hpp"
#include "cli/serving_notice.hpp"
#include "cli/state.hpp"
#include "core/clock.hpp"
#include "core/duration.hpp"
#include "core/paths.hpp"
#include "crypto/secret.hpp"
#include "link/link.hpp"
#include "provider/host.hpp"
#include "sandbox/run_terms.hpp"
#include "store/grant_store.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <fstream>
#include <iostream>
#include <unistd.h>

namespace runsnack::cli {

namespace asio = boost::asio;

namespace {

// --expose and --ollama -> the forward terms of the new grant.
Result<ForwardTerms> forward_terms(const ShareArgs& args) {
  ForwardTerms terms;
  for (const auto& text : args.expose) {
    auto target = parse_expose(text);
    if (!target) return target.error();
    if (find_target(terms.targets, target->name))
      return fail(errc::invalid_argument, "--expose names '" + target->name + "' twice: give each target its own NAME=");
    terms.targets.push_back(std::move(*target));
  }
  if (args.ollama) {
    asio::io_context io;
    asio::ip::tcp::socket probe(io);
    boost::system::error_code ec;
    probe.connect({asio::ip::make_address("127.0.0.1"), 11434}, ec);
    if (ec)
      return fail(errc::not_found, "--ollama: no Ollama answering on 127.0.0.1:11434 (" + ec.message() +
                                       "): start it with `ollama serve`, or expose another port with --expose");
    terms.targets.push_back({"ollama", "127.0.0.1", 11434, true});
  }
  if (terms.targets.size() > kMaxForwardTargets) return fail(errc::invalid_argument, "too many --expose targets");
  if (args.max_connections > 0) terms.max_connections = args.max_connections;
  return terms;
}

}  // namespace

// --rendezvous, else RUNSNACK_RENDEZVOUS, else {"rendezvous": "..."} in the
// state dir's config.json; empty when none.
Result<std::string> rendezvous_setting(const std::string& flag, const std::filesystem::path& state) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("RUNSNACK_RENDEZVOUS"); env && *env) return std::string(env);
  const std::filesystem::path path = state / "config.json";
  std::ifstream in(path);
  if (!in) return std::string();
  auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return fail(errc::malformed, path.string() + " is not a JSON object");
  auto it = j.find("rendezvous");
  if (it == j.end()) return std::string();
  if (!it->is_string()) return fail(errc::malformed, path.string() + ": \"rendezvous\" must be \"HOST:PORT\"");
  return it->get<std::string>();
}

Result<NewGrant> create_grant(const ShareArgs& args, const std::vector<int>& gpus, Database& db) {
  NewGrant made;
  Grant& grant = made.grant;
  grant.id = new_grant_id();
  made.secret = new_secret();
  grant.key = derive_grant_key(made.secret);
  grant.created = std::chrono::system_clock::now();
  if (args.expires != "never") {
    auto d = parse_duration(args.expires.empty() ? kDefaultLinkLifetime : args.expires);
    if (!d) return fail(errc::invalid_argument, "--expires: " + d.error().what() + " (or `never` for a link that does not expire)");
    // Stored in whole seconds: round up, so a link never dies early.
    grant.expires = std::chrono::ceil<std::chrono::seconds>(grant.created + *d);
  }
  if (args.max_uses > 0) grant.max_uses = args.max_uses;
  if (args.max_sessions > 0) grant.max_sessions = args.max_sessions;
  auto services = parse_service_list(args.allow);
  if (!services) return services.error();
  grant.services = *services;
  auto forward = forward_terms(args);
  if (!forward) return forward.error();
  made.forward = *forward;
  if (!forward->targets.empty()) {
    grant.services.insert(kServiceForward);
    grant.terms[kServiceForward] = to_json(*forward);
  }
  if (!args.bandwidth.empty()) {
    auto rate = parse_bandwidth(args.bandwidth);
    if (!rate) return rate.error();
    grant.bandwidth_bytes_per_s = *rate;
  }
  grant.gpus = gpus;
  grant.bind_first = args.bind_first;
  grant.label = args.label;
  // The label is the provider's note; consumers see it only when asked (services/info_service.cpp).
  if (args.public_label) grant.terms[kServiceInfo] = {{"public_label", true}};
  exec::RunTerms run_terms;
  if (!args.run_timeout.empty()) {
    auto d = parse_duration(args.run_timeout);
    if (!d) return d.error();
    run_terms.timeout_s = std::chrono::duration<double>(*d).count();
  }
  for (auto [text, field] : {std::pair{&args.memory, &run_terms.memory_bytes}, {&args.disk_quota, &run_terms.disk_quota_bytes}}) {
    if (text->empty()) continue;
    auto size = exec::parse_size(*text);
    if (!size) return size.error();
    *field = *size;
  }
  if (!args.max_transfer.empty()) {
    auto size = exec::parse_size(args.max_transfer);
    if (!size || *size == 0) return fail(errc::invalid_argument, "--max-transfer: expected a size such as 500M or 50G");
    run_terms.max_transfer_bytes = *size;
  }
  if (args.max_procs > 0) run_terms.max_procs = static_cast<std::uint64_t>(args.max_procs);
  run_terms.network = args.network;
  if (grant.services.count("run") || grant.services.count("shell") || grant.services.count("cp") ||
      grant.services.count("cuda"))
    grant.terms["run"] = run_terms.to_json();
  if (args.cpu_hours >= 0) grant.terms["run"]["cpu_hours"] = args.cpu_hours;
  if (args.gpu_hours >= 0) grant.terms["run"]["gpu_hours"] = args.gpu_hours;
  GrantStore grants(db);
  if (auto r = grants.create(grant); !r) return r.error();
  return made;
}

std::string expiry_note(const ShareArgs& args, const Grant& grant) {
  if (!grant.expires) return "never expires";
  std::string note = "expires " + rfc3339(*grant.expires);
  if (args.expires.empty())
    note += std::string(" (in ") + kDefaultLinkLifetime + " by default; --expires DURATION or --expires never changes it)";
  return note;
}

std::string uses_note(const Grant& grant) {
  if (!grant.max_uses) return "for any number of consumers";
  if (*grant.max_uses == 1) return "for the first consumer (one person, counted by their key), as often as they like";
  return "for the first " + std::to_string(*grant.max_uses) +
         " consumers (people, counted by their key), each as often as they like";
}

// The link on stdout (and its QR code on a terminal), or its fields in `ready` for --json.
void announce_link(const ShareArgs& args, const NewGrant& made, const std::string& text, nlohmann::json& ready) {
  ready["link"] = text;
  ready["grant"] = made.grant.id;
  ready["expires"] = made.grant.expires ? nlohmann::json(rfc3339(*made.grant.expires)) : nlohmann::json(nullptr);
  ready["max_uses"] = made.grant.max_uses ? nlohmann::json(*made.grant.max_uses) : nlohmann::json(nullptr);
  if (!made.forward.targets.empty()) ready["expose"] = made.grant.terms.at(kServiceForward)["targets"];
  if (args.json) return;
  std::cout << text << std::endl;
  if (isatty(STDOUT_FILENO) && !args.no_qr) std::cout << render_qr(text);
}

// The link made in this state's database and served by `serving`, which listens with its own
// settings; this process ends. Nothing here listens or reads the server's key.
int share_through(const ShareArgs& args, const std::vector<int>& gpus, const ServingShare& serving,
                  const std::string& who, const std::string& settings_hint) {
  if (!args.service_sets.empty())
    std::cerr << "runsnack: " << args.service_sets << " ignored: " << who << " listens on " << serving.listen
              << " with its own settings (" << settings_hint << ")" << std::endl;
  nlohmann::json ready = {{"event", "ready"}, {"peer", serving.peer.str()}, {"listen", serving.listen},
                          {"served_by", serving.pid}};
  if (!args.serve_only) {
    auto db = open_database();
    if (!db) return report(db.error());
    auto made = create_grant(args, gpus, *db);
    if (!made) return report(made.error());
    announce_link(args, *made, mint_link(serving.rendezvous, serving.candidates, serving.peer, made->grant.id, made->secret),
                  ready);
    if (!args.json)
      std::cerr << "Link " << made->grant.id << " (" << expiry_note(args, made->grant) << ", "
                << uses_note(made->grant) << ")"
                << " is served by " << who << " as " << serving.peer.str()
                << "; `runsnack revoke " << made->grant.id << "` ends it." << std::endl;
  } else if (!args.json) {
    std::cerr << "already served by " << who << std::endl;
  }
  if (args.json) print_json(ready);
  return 0;
}

// `share` in the machine's state, chosen by the rule in core/paths.hpp (a user in group runsnack, or
// root, with RUNSNACK_HOME unset): the link goes to the database that runsnack-share.service serves.
int share_through_service(const ShareArgs& args, const std::vector<int>& gpus) {
  auto dir = state_dir();
  if (!dir) return report(dir.error());
  auto serving = find_serving_share(*dir);
  if (!serving) return report(serving.error());
  if (!*serving)
    return report("nothing serves " + dir->string() +
                  ": start the service (sudo systemctl enable --now runsnack-share), or share with your own "
                  "state instead: RUNSNACK_HOME=~/.local/share/runsnack runsnack share ...");
  return share_through(args, gpus, **serving, "runsnack-share.service (pid " + std::to_string((*serving)->pid) + ")",
                       "RUNSNACK_SHARE_ARGS in /etc/default/runsnack");
}

}  // namespace runsnack::cli
