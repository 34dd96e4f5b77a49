// `runsnack rendezvous`: a signaling server and relay (rendezvous/rdv_server.hpp).
#include "cli/command.hpp"
#include "core/duration.hpp"
#include "crypto/peer_id.hpp"
#include "rendezvous/rdv_server.hpp"
#include "sandbox/run_terms.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <spdlog/spdlog.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <vector>

namespace runsnack::cli {

namespace asio = boost::asio;

namespace {

struct RendezvousArgs {
  std::string listen = "0.0.0.0:7443";
  bool relay = true;
  // Per pair and direction: anyone with a key can register and be introduced to
  // themselves, so a public relay bounds what one pair can push through.
  double max_relay_mbps = 100;
  double max_relay_gb = 10;
  std::size_t max_per_ip = 256;
  std::size_t max_relays_per_ip = 16;
  // Over time, whoever asks: a key made on the spot, or many from one address,
  // relays at most this much per window (docs/NAT.md, "Relay budgets").
  std::string relay_per_key = "2G";
  std::string relay_per_address = "4G";
  std::string relay_window = "1h";
  std::string relay_only_for;              // a file of PeerIds
  std::vector<std::string> relay_for;      // PeerIds
  bool json = false;
};

// The provider keys to relay for: --relay-for PEERID (repeated) and the
// PeerIds in --relay-only-for FILE (one a line; blank lines and # comments skipped).
Result<std::set<std::string>> relay_keys(const RendezvousArgs& args) {
  std::set<std::string> keys;
  for (const auto& text : args.relay_for) {
    auto id = PeerId::parse(text);
    if (!id) return fail(errc::invalid_argument, "--relay-for '" + text + "': " + id.error().what());
    keys.insert(id->str());
  }
  if (args.relay_only_for.empty()) return keys;
  std::ifstream in(args.relay_only_for);
  if (!in) return fail(errc::not_found, "--relay-only-for: cannot read " + args.relay_only_for);
  std::string line;
  std::size_t number = 0, listed = 0;
  while (std::getline(in, line)) {
    ++number;
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    line = line.substr(first, line.find_last_not_of(" \t\r") - first + 1);
    auto id = PeerId::parse(line);
    if (!id)
      return fail(errc::invalid_argument,
                  args.relay_only_for + " line " + std::to_string(number) + ": " + id.error().what());
    keys.insert(id->str());
    ++listed;
  }
  if (listed == 0)
    return fail(errc::invalid_argument, "--relay-only-for " + args.relay_only_for +
                                            " lists no PeerId (one a line); use --no-relay to relay for nobody");
  return keys;
}

int rendezvous(const RendezvousArgs& args) {
  rdv::ServerOptions options;
  auto colon = args.listen.rfind(':');
  std::string host = colon == std::string::npos ? args.listen : args.listen.substr(0, colon);
  std::string port = colon == std::string::npos ? "7443" : args.listen.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(port) > 65535)
    return report(fail(errc::invalid_argument, "bad --listen '" + args.listen + "': expected ADDR:PORT"));
  options.listen_address = host;
  options.port = static_cast<std::uint16_t>(std::stoul(port));
  options.relay = args.relay;
  options.max_relay_mbps = args.max_relay_mbps;
  options.max_relay_bytes = static_cast<std::uint64_t>(args.max_relay_gb * 1e9);
  options.max_connections_per_ip = args.max_per_ip;
  options.registry.max_relay_sides_per_ip = args.max_relays_per_ip;
  auto per_key = exec::parse_size(args.relay_per_key);
  if (!per_key) return report("--relay-per-key: " + per_key.error().what());
  auto per_address = exec::parse_size(args.relay_per_address);
  if (!per_address) return report("--relay-per-address: " + per_address.error().what());
  auto window = parse_duration(args.relay_window);
  if (!window) return report("--relay-window: " + window.error().what());
  options.budgets.per_key = *per_key;
  options.budgets.per_address = *per_address;
  options.budgets.window = *window;
  auto keys = relay_keys(args);
  if (!keys) return report(keys.error());
  options.relay_only_for = std::move(*keys);

  asio::io_context io(1);
  rdv::Server server(io.get_executor(), options);
  if (auto r = server.listen(); !r) return report(r.error());
  auto ep = server.local_endpoint();
  std::string where = (ep.address().is_v6() ? "[" + ep.address().to_string() + "]" : ep.address().to_string()) + ":" +
                      std::to_string(ep.port());
  // Caught from before "ready" is printed: a script that stops us right after it sees a clean exit.
  asio::signal_set signals(io, SIGINT, SIGTERM);
  if (args.json) {
    nlohmann::json ready = {{"event", "ready"}, {"listen", where}, {"relay", args.relay}};
    if (args.relay) {
      ready["relay_per_key"] = options.budgets.per_key;  // bytes per window; 0: no limit
      ready["relay_per_address"] = options.budgets.per_address;
      ready["relay_window_s"] = options.budgets.window.count();
      if (!options.relay_only_for.empty()) ready["relay_only_for"] = options.relay_only_for.size();
    }
    print_json(ready);
  } else {
    std::string limits;
    if (args.relay) {
      char rate[64] = "";
      if (args.max_relay_mbps > 0) std::snprintf(rate, sizeof rate, ", %.0f Mbit/s per pair", args.max_relay_mbps);
      auto budget = [](std::uint64_t bytes) { return bytes ? rdv::bytes_text(bytes) : std::string("unlimited"); };
      limits = rate + std::string(", ") + budget(options.budgets.per_key) + " per key and " +
               budget(options.budgets.per_address) + " per address every " + format_duration(options.budgets.window);
      if (!options.relay_only_for.empty())
        limits += ", only for " + std::to_string(options.relay_only_for.size()) + " listed key" +
                  (options.relay_only_for.size() == 1 ? "" : "s");
    }
    std::cerr << "rendezvous listening on " << where << (args.relay ? " (relay on" : " (relay off") << limits << ")"
              << "; it sees PeerIds, link ids, addresses and traffic volume, never secrets or data. Ctrl-C stops."
              << std::endl;
  }
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (!ec) server.stop();
  });
  asio::co_spawn(io, server.run(), [&](std::exception_ptr e) {
    signals.cancel();
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      spdlog::error("rendezvous: {}", ex.what());
    }
  });
  io.run();
  return 0;
}

}  // namespace

void add_rendezvous_command(CLI::App& app, ExitStatus& status) {
  auto args = std::make_shared<RendezvousArgs>();
  auto* cmd = app.add_subcommand("rendezvous", "Run a rendezvous: introduces providers and consumers, relays when needed");
  cmd->add_option("--listen", args->listen, "ADDR:PORT to listen on (default 0.0.0.0:7443)");
  cmd->add_flag("--relay,!--no-relay", args->relay, "Relay connections that cannot go direct (default: on)");
  cmd->add_option("--max-relay-gb", args->max_relay_gb,
                  "Gigabytes per relayed pair and direction before the pair is closed (0: no limit)")
      ->check(kNonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--max-relay-mbps", args->max_relay_mbps, "Bandwidth per relayed pair and direction (0: no limit)")
      ->check(kNonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--max-per-ip", args->max_per_ip, "Open connections allowed per client IP")
      ->check(kPositiveNumber)
      ->capture_default_str();
  cmd->add_option("--max-relays-per-ip", args->max_relays_per_ip,
                  "Relayed connections (waiting or spliced sides) allowed per client IP")
      ->check(kPositiveNumber)
      ->capture_default_str();
  cmd->add_option("--relay-per-key", args->relay_per_key,
                  "Bytes one provider key may relay per --relay-window, all its pairs, both directions "
                  "(e.g. 500M, 2G; 0: no limit); then its relays are closed and refused until the window ends")
      ->type_name("SIZE")
      ->capture_default_str();
  cmd->add_option("--relay-per-address", args->relay_per_address,
                  "Bytes relayed per --relay-window to or from one client address (an IPv4 address, an IPv6 /64), "
                  "every key together (0: no limit)")
      ->type_name("SIZE")
      ->capture_default_str();
  cmd->add_option("--relay-window", args->relay_window,
                  "The window of those budgets, from a budget's first byte (e.g. 30m, 1h, 1d)")
      ->type_name("DURATION")
      ->capture_default_str();
  cmd->add_option("--relay-only-for", args->relay_only_for,
                  "Relay only for the provider PeerIds in FILE (one a line, # comments); others are refused "
                  "with a reason (introductions, direct and punched paths still work for them)")
      ->type_name("FILE");
  cmd->add_option("--relay-for", args->relay_for,
                  "Relay only for this provider PeerId (repeat for more; adds to --relay-only-for)")
      ->type_name("PEERID");
  cmd->add_flag("--json", args->json, "Print {\"event\":\"ready\",...} as JSON");
  cmd->footer("Stores nothing on disk. Sees PeerIds, link ids (not secrets), addresses, timing and volume;\n"
              "TLS runs end to end between the peers, so relayed bytes are ciphertext. A provider registers\n"
              "only by signing a fresh challenge with its PeerId's key; consumers' addresses and relay tokens\n"
              "go only to it; a relay pair is that provider and a consumer introduced to it (docs/NAT.md).\n"
              "Anyone can make a key, so the relay is also budgeted over time: by default 2 GiB per provider\n"
              "key and 4 GiB per client address an hour, charged with every byte of their relayed pairs; a\n"
              "spent budget closes its pairs and refuses new relays, with the reason, until its window ends.\n"
              "The budgets apply to listed keys too (--relay-per-key 0 lifts that one).");
  cmd->callback([&status, args] { run_command(status, [&] { return rendezvous(*args); }); });
}

}  // namespace runsnack::cli
