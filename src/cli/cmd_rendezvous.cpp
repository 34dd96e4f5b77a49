// `runsnack rendezvous`: a signaling server and relay (rendezvous/rdv_server.hpp).
#include "cli/command.hpp"
#include "rendezvous/rdv_server.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <spdlog/spdlog.h>

#include <cstdio>
#include <iostream>
#include <memory>

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
  bool json = false;
};

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

  asio::io_context io(1);
  rdv::Server server(io.get_executor(), options);
  if (auto r = server.listen(); !r) return report(r.error());
  auto ep = server.local_endpoint();
  std::string where = (ep.address().is_v6() ? "[" + ep.address().to_string() + "]" : ep.address().to_string()) + ":" +
                      std::to_string(ep.port());
  // Caught from before "ready" is printed: a script that stops us right after it sees a clean exit.
  asio::signal_set signals(io, SIGINT, SIGTERM);
  if (args.json) {
    print_json({{"event", "ready"}, {"listen", where}, {"relay", args.relay}});
  } else {
    char limits[96] = "";
    if (args.relay && args.max_relay_mbps > 0)
      std::snprintf(limits, sizeof limits, ", %.0f Mbit/s per pair", args.max_relay_mbps);
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
  cmd->add_flag("--json", args->json, "Print {\"event\":\"ready\",...} as JSON");
  cmd->footer("Stores nothing on disk. Sees PeerIds, link ids (not secrets), addresses, timing and volume;\n"
              "TLS runs end to end between the peers, so relayed bytes are ciphertext. A provider registers\n"
              "only by signing a fresh challenge with its PeerId's key; consumers' addresses and relay tokens\n"
              "go only to it; a relay pair is that provider and a consumer introduced to it (docs/NAT.md).");
  cmd->callback([&status, args] { run_command(status, [&] { return rendezvous(*args); }); });
}

}  // namespace runsnack::cli
