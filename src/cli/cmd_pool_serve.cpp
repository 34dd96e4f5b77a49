// `runsnack pool serve`: the coordinator (docs/ARCHITECTURE.md section 7), a
// Coordinator's services on a provider assembled by ProviderHost
// (provider/host.hpp), so it registers at a rendezvous and asks for a port
// mapping like `share`. This file reads the flags and prints.
#include "cli/pool_serve.hpp"

#include "cli/pool_dashboard.hpp"
#include "cli/pool_links.hpp"
#include "cli/share_link.hpp"
#include "cli/state.hpp"
#include "core/log_exceptions.hpp"
#include "pool/browser/browser_workers.hpp"
#include "pool/coordinator.hpp"
#include "pool/ledger_rules.hpp"
#include "pool/pool_store.hpp"
#include "pool/wire.hpp"
#include "provider/host.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <iostream>

namespace runsnack::cli {

namespace asio = boost::asio;
using json = nlohmann::json;

namespace {

struct ServeArgs {
  std::string db, listen, starting_credits, lease = "30", http, scheduler = "learned", max_price, give_up_after = "60",
              independent_wait, rendezvous;
  std::vector<std::string> http_tls, http_origins;  // {CERT, KEY}; extra WebSocket origins
  bool json = false, no_port_mapping = false;
};

int serve(const ServeArgs& args) {
  if (!args.starting_credits.empty())
    return report("--starting-credits is gone: a new identity gets no credits (any number of fresh keys could mint "
                  "them). Grant credits explicitly: `runsnack pool grant PEER N`, or hand out a submit link that "
                  "carries them: `runsnack pool link --credits N`");
  pool::PoolPolicy policy;
  try {
    policy.lease_ms = static_cast<std::int64_t>(std::stod(args.lease) * 1000);
  } catch (const std::exception&) {
    return report("bad --lease '" + args.lease + "': seconds, e.g. 30");
  }
  if (policy.lease_ms < 100) return report("--lease must be at least 0.1 s");
  try {
    policy.give_up_ms = static_cast<std::int64_t>(std::stod(args.give_up_after) * 1000);
  } catch (const std::exception&) {
    return report("bad --give-up-after '" + args.give_up_after + "': seconds, e.g. 60");
  }
  if (policy.give_up_ms < 1000) return report("--give-up-after must be at least 1 s");
  // A shard's copy waiting for an independent device must settle before the
  // job is given up as stuck: by default half the give-up time, at most 20 s.
  policy.independent_wait_ms = std::min<std::int64_t>(policy.independent_wait_ms, policy.give_up_ms / 2);
  if (!args.independent_wait.empty()) {
    try {
      policy.independent_wait_ms = static_cast<std::int64_t>(std::stod(args.independent_wait) * 1000);
    } catch (const std::exception&) {
      return report("bad --independent-wait '" + args.independent_wait + "': seconds, e.g. 20");
    }
    if (policy.independent_wait_ms < 0 || policy.independent_wait_ms >= policy.give_up_ms)
      return report("--independent-wait must be 0 or more and less than --give-up-after (" + args.give_up_after +
                    " s): a job waiting that long is given up");
  }
  if (!args.max_price.empty()) {
    auto most = pool::parse_credits(args.max_price);
    if (!most || *most <= 0) return report("bad --max-price '" + args.max_price + "': credits per device-hour, e.g. 20");
    policy.max_price = static_cast<double>(*most) / static_cast<double>(pool::kMicroPerCredit);
  }
  if (args.http.empty() && (!args.http_tls.empty() || !args.http_origins.empty()))
    return report(std::string(args.http_tls.empty() ? "--http-origin" : "--http-tls") +
                  " is for the web dashboard: give --http ADDR:PORT too, e.g. --http 0.0.0.0:8443");
  std::string db_shown;
  auto store = open_pool_store(args.db, policy, db_shown, false);
  if (!store) return report(store.error());
  auto identity = open_identity();
  if (!identity) return report(identity.error());
  auto db = open_database();
  if (!db) return report(db.error());
  // The address and links of the last run, unless --listen says otherwise:
  // workers and submitters holding the old links reconnect by themselves.
  auto saved = load_pool_serve_state();
  if (!saved) return report(saved.error());
  PoolServeState state = saved->value_or(PoolServeState{});
  const bool reuse = args.listen.empty() && !state.listen.empty();
  const std::string listen = !args.listen.empty() ? args.listen : reuse ? state.listen : "0.0.0.0:0";

  HostOptions options;
  auto colon = listen.rfind(':');
  options.provider.listen_address = listen.substr(0, colon);
  std::uint16_t port = 0;
  if (colon != std::string::npos) {
    try {
      port = static_cast<std::uint16_t>(std::stoul(listen.substr(colon + 1)));
    } catch (const std::exception&) {
      return report("bad --listen '" + listen + "': expected ADDR:PORT");
    }
  }
  options.provider.ports = {port, port};
  // Workers and submitters are sessions: a lab's machines may share one NAT address.
  options.provider.sessions = {4096, 512};
  options.port_mapping = !args.no_port_mapping;
  {
    auto dir = state_dir();
    if (!dir) return report(dir.error());
    auto setting = rendezvous_setting(args.rendezvous, *dir);
    if (!setting) return report(setting.error());
    if (!setting->empty()) {
      auto ep = parse_endpoint(*setting, "rendezvous");
      if (!ep) return report(ep.error());
      options.rendezvous = *ep;
    }
  }

  asio::io_context io(1);
  auto emit = [&args](const json& ev) {
    if (args.json) print_json(ev);
  };
  PoolDashboard dashboard;
  if (!args.http.empty())
    if (auto r = dashboard.start(io.get_executor(), args.http, *store, args.http_tls, args.http_origins); !r) return report(r.error());
  // The coordinator's events (not the provider's, which name addresses) also go to the dashboard.
  auto emit_pool = [&emit, &dashboard](const json& ev) {
    if (ev.contains("png")) {  // a preview tile: the dashboard shows it; the log only notes it
      json note = ev;
      note.erase("png");
      emit(note);
    } else {
      emit(ev);
    }
    dashboard.publish(ev);
  };
  pool::Coordinator coordinator(io.get_executor(), *store, emit_pool);
  if (args.scheduler == "learned") coordinator.use_learned_scheduler();
  ServiceRouter router = default_services();
  coordinator.add_services(router);
  // Browsers join on the dashboard's port: /join and its /worker WebSocket.
  std::optional<pool::browser::BrowserWorkers> browsers;
  if (dashboard.server()) {
    browsers.emplace(coordinator, *db);
    dashboard.server()->serve_worker_sockets([&b = *browsers](pool::dashboard::HttpStream s, pool::dashboard::Request r) {
      return b.serve(std::move(s), std::move(r));
    });
  }
  HostEvents events;
  events.provider = emit;
  events.rendezvous = [&args](const std::string& state) {
    if (args.json) print_json({{"event", "rendezvous"}, {"state", state}});
    else spdlog::info("rendezvous: {}", state);
  };
  events.not_mapped = [&args](const std::string& why) {
    if (args.json) print_json({{"event", "port_mapping"}, {"mapped", false}, {"why", why}});
    else spdlog::debug("no port mapping: {}", why);
  };
  const bool has_rendezvous = options.rendezvous.has_value();
  events.mapped = [&args, has_rendezvous](const PortMapping& mapping) {
    if (args.json)
      print_json({{"event", "mapped"}, {"address", mapping.external().str()}, {"protocol", mapping.protocol()}});
    else
      std::cerr << "The router maps the coordinator's port to " << mapping.external().str() << " ("
                << mapping.protocol() << ")"
                << (has_rendezvous ? ": workers and submitters outside find it through the rendezvous" : "")
                << std::endl;
  };
  ProviderHost host(io.get_executor(), *identity, *db, std::move(options), std::move(router), std::move(events));
  if (auto r = host.listen(); !r) {
    if (reuse)
      return report("cannot listen on " + listen + ", the address this coordinator's links name (from its last run): " +
                    r.error().what() + "; stop what holds it, or give --listen ADDR:PORT (its links then change)");
    return report(r.error());
  }
  state.listen = listen.substr(0, colon) + ":" + std::to_string(host.local_endpoint().port());
  state.rendezvous = host.rendezvous();
  auto join_link = reuse_or_make_grant(*db, state.join, pool::kServiceWorker, "pool join");
  if (!join_link) return report(join_link.error());
  auto submit_link = reuse_or_make_grant(*db, state.submit, pool::kServiceClient, "pool submit");
  if (!submit_link) return report(submit_link.error());
  if (auto r = save_pool_serve_state(state); !r) return report(r.error());
  const std::string join_grant = join_link->grant, submit_grant = submit_link->grant;
  const std::string join = host.link(join_link->grant, join_link->secret);
  const std::string submit = host.link(submit_link->grant, submit_link->secret);
  // The secret rides in the fragment, which a browser never sends.
  const json browser_join = dashboard.server() ? json(dashboard.server()->url() + "join#" + join_grant + ":" + join_link->secret)
                                               : json(nullptr);
  // Caught from before "ready" is printed: a script that stops us right after it sees a clean exit.
  asio::signal_set signals(io, SIGINT, SIGTERM);
  if (args.json) {
    json ready = {{"event", "ready"}, {"join", join}, {"submit", submit}, {"http", dashboard.url()}, {"browser_join", browser_join},
                  {"join_grant", join_grant}, {"submit_grant", submit_grant}, {"peer", identity->peer_id().str()},
                  {"db", db_shown}, {"listen", state.listen}};
    if (host.rendezvous()) ready["rendezvous"] = host.rendezvous()->str();
    print_json(ready);
  } else {
    std::cout << "join:   " << join << "\nsubmit: " << submit << std::endl;
    if (dashboard.server())
      std::cout << "http:   " << dashboard.server()->url() << "\nbrowser: " << browser_join.get<std::string>() << std::endl;
    std::cerr << "Pool coordinator on port " << host.local_endpoint().port() << " (links " << join_grant << ", "
              << submit_grant << "; revoke with `runsnack revoke`)"
              << (host.rendezvous() ? "; registered at the rendezvous " + host.rendezvous()->str() : "")
              << ". Ctrl-C stops." << std::endl;
  }
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (ec) return;
    coordinator.stop();
    host.stop();
    dashboard.stop();
    if (browsers) browsers->stop();
  });
  host.start([&] {  // the provider ended (a signal, or a failure it logged)
    signals.cancel();
    coordinator.stop();
    dashboard.stop();
    if (browsers) browsers->stop();
  });
  asio::co_spawn(io, coordinator.run_maintenance(), log_exceptions("pool maintenance"));
  if (dashboard.server()) asio::co_spawn(io, dashboard.server()->run(), log_exceptions("dashboard"));
  io.run();
  return 0;
}

}  // namespace

void add_pool_serve_command(CLI::App& pool, ExitStatus& status) {
  auto sa = std::make_shared<ServeArgs>();
  auto* serve_cmd = pool.add_subcommand("serve", "Run a coordinator; prints a join link and a submit link");
  serve_cmd->add_option("--db", sa->db, "sqlite:PATH or postgres://... (default: pool.db in the state folder)");
  serve_cmd->add_option("--listen", sa->listen,
                        "ADDR:PORT to listen on (default: the address of the last run, so its links stay valid; "
                        "0.0.0.0 and a free port the first time)");
  serve_cmd->add_option("--starting-credits", sa->starting_credits)
      ->group("");  // gone (Sybil minting): refused with what to do instead
  serve_cmd->add_option("--max-price", sa->max_price,
                        "Refuse workers that ask more than this many credits per device-hour (default: any)");
  serve_cmd->add_option("--lease", sa->lease, "Task lease in seconds, renewed by heartbeats (default 30)");
  serve_cmd->add_option("--give-up-after", sa->give_up_after,
                        "Fail a job when no online worker may run any of its remaining tasks (e.g. a quorum copy "
                        "every online worker is barred from) for this many seconds, saying why (default 60)");
  serve_cmd->add_option("--independent-wait", sa->independent_wait,
                        "Seconds a replicated shard whose copies disagree (or agree only from one network) waits for "
                        "a worker on another network before it is delivered unverified (default 20, at most half of "
                        "--give-up-after)");
  serve_cmd->add_option("--scheduler", sa->scheduler,
                        "learned: the multi-objective scheduler that learns each device's speed, price and "
                        "reliability and follows each job's --prefer (default; docs/SCHEDULER.md); fastest: part 1's "
                        "fastest free device first, which ignores --prefer")
      ->check(CLI::IsMember({"fastest", "learned"}));
  serve_cmd->add_option("--http", sa->http,
                        "ADDR:PORT for a web dashboard and the browser worker page (its link is printed as browser:), e.g. 127.0.0.1:8080 (default: none)");
  serve_cmd->add_option("--http-tls", sa->http_tls,
                        "CERT KEY: serve --http over TLS (https) with this PEM certificate chain and key, so phones "
                        "on a network get WebGPU and WebCrypto (a secure context); links then say https://")
      ->expected(2)
      ->type_name("CERT KEY");
  serve_cmd->add_option("--http-origin", sa->http_origins,
                        "ORIGIN a TLS reverse proxy serves the dashboard as (e.g. https://pool.example.org): its "
                        "WebSocket origin and Host are accepted; repeatable (docs/BROWSER-WORKERS.md)")
      ->allow_extra_args(false)
      ->type_name("ORIGIN");
  serve_cmd->add_option("--rendezvous", sa->rendezvous,
                        "HOST:PORT of a rendezvous to register at, for workers and submitters behind NAT: the links "
                        "then name it (also RUNSNACK_RENDEZVOUS or config.json)");
  serve_cmd->add_flag("--no-port-mapping", sa->no_port_mapping,
                      "Do not ask the router for a port mapping (UPnP/NAT-PMP)");
  serve_cmd->add_flag("--json", sa->json, "One JSON event per line; the first is {\"event\":\"ready\",...}");
  serve_cmd->callback([&status, sa] { run_command(status, [&] { return serve(*sa); }); });

}

}  // namespace runsnack::cli
