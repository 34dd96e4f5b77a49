// `runsnack forward LINK [[BIND:]LOCAL:]TARGET...`: local listeners whose
// connections reach targets the provider exposed, one stream per connection
// (services/forward). Runs until Ctrl-C; a session that drops is re-made in the
// background, and connections accepted meanwhile wait for it.
#include "cli/command.hpp"
#include "cli/link_arg.hpp"
#include "cli/session_end.hpp"
#include "cli/state.hpp"
#include "core/printable.hpp"
#include "consumer/consumer.hpp"
#include "consumer/reconnect.hpp"
#include "services/forward/forward_service.hpp"
#include "services/common/pump.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <iostream>

namespace runsnack::cli {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
// How long a connection accepted while the session is down waits for it.
constexpr std::chrono::milliseconds kWaitForSession{15000};
constexpr std::chrono::milliseconds kPoll{100};
// Stream opens awaiting the provider's answer at once: well under the
// provider's yamux accept backlog (256), which refuses streams beyond it, so
// that a burst of local connections is queued here instead.
constexpr std::size_t kMaxPendingOpens = 64;

struct ForwardArgs {
  std::string link;
  std::vector<std::string> specs;
  bool json = false;
  double timeout_s = 10;
};

// What every coroutine of the command shares; lives in forward()'s frame
// (co_spawned coroutines get a shared_ptr to it).
struct ForwardState {
  Link link;
  std::unique_ptr<Consumer> consumer;
  ConnectOptions connect;
  bool json = false;
  std::shared_ptr<Session> session;  // null while reconnecting
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors;
  bool stopping = false;
  std::optional<std::string> refusal;  // why the provider would not make a new session
  std::optional<std::string> ended;    // why the provider ended the session, when it said so
  std::uint64_t next_id = 1;
  std::size_t pending_opens = 0;

  void event(const nlohmann::json& ev) {
    if (json) print_json(ev);
  }
  void stop() {
    stopping = true;
    boost::system::error_code ignored;
    for (auto& a : acceptors) a->close(ignored);
    if (session) session->mux().close();
  }
};

bool session_alive(const ForwardState& s) { return s.session && !s.session->mux().is_closed(); }

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer timer(co_await asio::this_coro::executor, d);
  co_await timer.async_wait(kTuple);
}

void log_exception(std::exception_ptr e) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    spdlog::error("forward: {}", ex.what());
  }
}

nlohmann::json session_event(const char* name, const Session& s) {
  return {{"event", name}, {"peer", s.info().peer.str()}, {"path", s.info().path},
          {"address", s.info().remote_address}, {"setup_ms", s.info().setup.count() / 1000.0}};
}

// Watches the session; when it ends, makes a new one (consumer/reconnect.hpp) until stop. A refusal
// (the link revoked or expired) stops the forward.
asio::awaitable<void> keep_session(std::shared_ptr<ForwardState> state) {
  while (!state->stopping) {
    if (session_alive(*state)) {
      co_await sleep_for(kPoll);
      continue;
    }
    // The provider's goodbye (session/goodbye.hpp): a kick, revocation or expiry is meant, and a new
    // session would undo a kick; a provider that stopped sharing may come back (a restart).
    const std::optional<Goodbye> goodbye = state->session ? state->session->goodbye() : std::nullopt;
    if (goodbye && goodbye->ended != kEndedProviderStopped) {
      state->event(session_end_json(*state->session));
      state->ended = session_end_text(*state->session);
      state->stop();
      break;
    }
    auto why = state->session ? state->session->mux().close_reason() : std::nullopt;
    const std::string reason = goodbye ? goodbye->message : why ? why->what() : std::string("session closed");
    state->session.reset();
    state->event({{"event", "session_lost"}, {"reason", reason}, {"ended", goodbye ? goodbye->ended : "lost"}});
    if (!state->json) std::cerr << "session lost (" << printable(reason) << "); reconnecting..." << std::endl;
    ReconnectOptions again;
    again.connect = state->connect;
    again.stop = &state->stopping;  // until a refusal or Ctrl-C
    auto fresh = co_await reconnect(*state->consumer, state->link, std::move(again));
    if (fresh) {
      state->session = std::shared_ptr<Session>(std::move(*fresh));
      state->event(session_event("reconnected", *state->session));
      if (!state->json) std::cerr << "reconnected" << std::endl;
    } else if (!state->stopping) {
      state->refusal = fresh.error().what();
      state->event({{"event", "refused"}, {"reason", *state->refusal}});
      state->stop();
    }
  }
}

// One accepted local connection = one stream to `target`.
asio::awaitable<void> serve_local(std::shared_ptr<ForwardState> state, tcp::socket socket, std::string target) {
  const std::uint64_t id = state->next_id++;
  auto waited_until = std::chrono::steady_clock::now() + kWaitForSession;
  while (!session_alive(*state) && !state->stopping && std::chrono::steady_clock::now() < waited_until)
    co_await sleep_for(kPoll);
  if (!session_alive(*state)) {
    state->event({{"event", "refused"}, {"id", id}, {"target", target}, {"reason", "no session to the provider"}});
    co_return;  // the socket closes: the client sees the connection end
  }
  while (state->pending_opens >= kMaxPendingOpens && !state->stopping) co_await sleep_for(std::chrono::milliseconds(2));
  if (!session_alive(*state)) {
    state->event({{"event", "refused"}, {"id", id}, {"target", target}, {"reason", "no session to the provider"}});
    co_return;
  }
  std::shared_ptr<Session> session = state->session;
  auto started = std::chrono::steady_clock::now();
  // Counted until the provider's answer comes (or never will): well under its accept backlog.
  struct PendingOpen {
    ForwardState& state;
    bool counted = true;
    explicit PendingOpen(ForwardState& s) : state(s) { ++state.pending_opens; }
    void answered() {
      if (counted) --state.pending_opens;
      counted = false;
    }
    ~PendingOpen() { answered(); }
  } pending(*state);
  auto stream = co_await open_forward(*session, target);
  std::optional<std::string> refused;
  if (!stream) refused = stream.error().what();
  PumpResult result;
  if (stream) {
    // The client's first bytes follow the header now; the provider's answer gates the way back.
    PumpOptions options;
    options.before_stream_to_socket = [&]() -> asio::awaitable<Result<void>> {
      auto answer = co_await session->answers(**stream, kServiceForward);
      pending.answered();
      if (!answer) refused = answer.error().what();
      else state->event({{"event", "open"}, {"id", id}, {"target", target}});
      co_return answer;
    };
    result = co_await pump(socket, **stream, options);
  }
  if (refused) {
    state->event({{"event", "refused"}, {"id", id}, {"target", target}, {"reason", *refused}});
    if (!state->json) std::cerr << "connection to " << target << " refused: " << printable(*refused) << std::endl;
    co_return;
  }
  nlohmann::json closed = {{"event", "closed"},
                           {"id", id},
                           {"target", target},
                           {"bytes_sent", result.socket_to_stream},
                           {"bytes_received", result.stream_to_socket},
                           {"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()}};
  if (result.error) closed["error"] = *result.error;
  state->event(closed);
}

asio::awaitable<void> accept_loop(std::shared_ptr<ForwardState> state, tcp::acceptor* acceptor, std::string target) {
  auto ex = co_await asio::this_coro::executor;
  while (!state->stopping) {
    auto [ec, socket] = co_await acceptor->async_accept(kTuple);
    if (state->stopping) break;
    if (ec) {
      spdlog::warn("accept on {}: {}", target, ec.message());
      co_await sleep_for(kPoll);  // out of descriptors and the like: do not spin
      continue;
    }
    boost::system::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    asio::co_spawn(ex, serve_local(state, std::move(socket), target), log_exception);
  }
}

struct Planned {
  ForwardSpec spec;
  std::uint16_t local_port = 0;
  const ForwardTarget* target = nullptr;  // null: a port the provider did not list (it will refuse)
};

// Resolves the user's specs (or all exposed targets) against the provider's list.
Result<std::vector<Planned>> plan(const std::vector<std::string>& specs, const ForwardListing& listing) {
  std::vector<Planned> out;
  if (specs.empty()) {
    if (listing.terms.targets.empty())
      return fail(errc::not_found, "the provider exposes nothing to forward: ask for a link made with `runsnack share "
                                   "--expose PORT`");
    for (const auto& t : listing.terms.targets) out.push_back({{"127.0.0.1", std::nullopt, t.name}, t.port, &t});
    return out;
  }
  for (const auto& text : specs) {
    auto spec = parse_forward_spec(text);
    if (!spec) return spec.error();
    Planned p{*spec, 0, find_target(listing.terms.targets, spec->target)};
    // Refused here, before listening: the provider would refuse every connection to it.
    if (!p.target) {
      std::string names;
      for (const auto& t : listing.terms.targets)
        names += (names.empty() ? "" : ", ") + t.name + (t.name == std::to_string(t.port) ? "" : " (port " + std::to_string(t.port) + ")");
      return fail(errc::not_found, "the provider does not expose '" + printable(spec->target) +
                                       "' (exposed: " + (names.empty() ? "none" : names) +
                                       "): forward one of those, or ask for a link made with `runsnack share --expose " +
                                       printable(spec->target) + "`");
    }
    p.local_port = spec->local_port ? *spec->local_port : p.target->port;
    out.push_back(std::move(p));
  }
  return out;
}

std::string describe(const Planned& p) {
  return p.target->name + " (" + p.target->address() + " on the provider" +
         (p.target->host_header ? ", Host header rewritten" : "") + ")";
}

asio::awaitable<int> run_forward(std::shared_ptr<ForwardState> state, ForwardArgs args) {
  auto ex = co_await asio::this_coro::executor;
  // The listing follows the grant proof without waiting for its answer (a round trip fewer); a
  // refused proof is then the listing's answer. Later sessions (keep_session) wait for it.
  ConnectOptions first_connect = state->connect;
  first_connect.pipelined_proof = true;
  auto first = co_await state->consumer->connect(state->link, first_connect);
  if (!first) co_return report(first.error());
  state->session = std::shared_ptr<Session>(std::move(*first));

  auto listing = co_await list_forward_targets(*state->session);
  if (!listing) {
    if (listing.error().message.find("does not allow") != std::string::npos)
      co_return report("this link does not allow port forwarding: ask the provider for a link made with "
                       "`runsnack share --expose PORT`");
    co_return report(listing.error());
  }
  state->event(session_event("connected", *state->session));
  auto planned = plan(args.specs, *listing);
  if (!planned) co_return report(planned.error());

  std::vector<std::string> targets;
  for (const auto& p : *planned) {
    boost::system::error_code ec;
    auto address = asio::ip::make_address(p.spec.bind, ec);
    if (ec) co_return report("bad bind address '" + p.spec.bind + "': give an IP address such as 127.0.0.1");
    auto acceptor = std::make_unique<tcp::acceptor>(ex);
    tcp::endpoint endpoint(address, p.local_port);
    acceptor->open(endpoint.protocol(), ec);
    if (!ec) acceptor->set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor->bind(endpoint, ec);
    if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      co_return report("cannot listen on " + p.spec.bind + ":" + std::to_string(p.local_port) + " (" + ec.message() +
                       "): pick another local port, e.g. `runsnack forward LINK 0:" + p.spec.target + "`");
    auto local = acceptor->local_endpoint();
    std::string local_text = (local.address().is_v6() ? "[" + local.address().to_string() + "]"
                                                       : local.address().to_string()) +
                             ":" + std::to_string(local.port());
    nlohmann::json ev = {{"event", "listening"}, {"local", local_text}, {"port", local.port()},
                         {"target", p.spec.target}};
    if (p.target) ev["to"] = p.target->address(), ev["host_header"] = p.target->host_header;
    state->event(ev);
    if (!args.json) std::cout << "forwarding " << local_text << " -> " << describe(p) << std::endl;
    state->acceptors.push_back(std::move(acceptor));
    targets.push_back(p.spec.target);
  }
  if (!args.json)
    std::cout << "over a " << state->session->info().path << " session to " << state->session->info().peer.str()
              << " (" << state->session->info().remote_address << "); Ctrl-C stops" << std::endl;
  nlohmann::json ready = {{"event", "ready"}};
  if (listing->bandwidth_bytes_per_s) ready["bandwidth_bytes_per_s"] = *listing->bandwidth_bytes_per_s;
  state->event(ready);

  for (std::size_t i = 0; i < state->acceptors.size(); ++i)
    asio::co_spawn(ex, accept_loop(state, state->acceptors[i].get(), targets[i]), log_exception);
  co_await keep_session(state);
  if (state->ended) co_return report(*state->ended);
  if (state->refusal) co_return report("the provider refused a new session (" + *state->refusal + "): forwarding stopped");
  co_return 0;
}

int forward(const ForwardArgs& args) {
  asio::io_context io(1);  // before `state`: its sockets must go first
  auto state = std::make_shared<ForwardState>();
  auto link = resolve_link(args.link);
  if (!link) return report(link.error());
  state->link = *link;
  auto identity = open_identity();
  if (!identity) return report(identity.error());
  auto consumer = Consumer::create(*identity);
  if (!consumer) return report(consumer.error());
  state->consumer = std::move(*consumer);
  state->connect.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(args.timeout_s * 1000));
  state->json = args.json;

  int exit_code = kExitFailure;
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([state](const boost::system::error_code& ec, int) {
    if (!ec) state->stop();
  });
  asio::co_spawn(io, run_forward(state, args), [&](std::exception_ptr e, int code) {
    exit_code = code;
    signals.cancel();
    state->stop();  // ends the other coroutines: listeners closed, session closed
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        exit_code = report(std::string("internal error: ") + ex.what());
      }
    }
  });
  io.run();
  state->acceptors.clear();
  state->session.reset();
  if (!args.json && exit_code == 0) std::cerr << "stopped forwarding" << std::endl;
  return exit_code;
}

bool looks_like_target(const std::string& word) {
  if (word.empty() || word.rfind("runsnack:", 0) == 0) return false;
  return word.find(':') != std::string::npos ||
         std::all_of(word.begin(), word.end(), [](unsigned char c) { return std::isdigit(c); });
}

}  // namespace

void add_forward_command(CLI::App& app, ExitStatus& status) {
  auto args = std::make_shared<ForwardArgs>();
  auto* cmd = app.add_subcommand("forward", "Reach TCP services the provider exposed, as if they ran here");
  cmd->add_option("LINK", args->link, kLinkHelp);
  cmd->add_option("TARGET", args->specs,
                  "[[BIND:]LOCAL:]TARGET: TARGET is a port or a name the provider exposed; LOCAL defaults to the "
                  "target's port, BIND to 127.0.0.1 (none: every exposed target)");
  cmd->add_flag("--json", args->json,
                "One JSON event per line: connected, listening, ready, open, closed, refused, session_lost, "
                "reconnected");
  cmd->add_option("--timeout", args->timeout_s, "Seconds to wait for the provider")->capture_default_str();
  cmd->footer(
      "Each local connection is one encrypted stream in the session; the provider decides which targets,\n"
      "how many connections and how much bandwidth. Runs until Ctrl-C and reconnects by itself.\n"
      "Examples:  runsnack forward LINK 11434        (Ollama: OLLAMA_HOST=127.0.0.1:11434 ollama run ...)\n"
      "           runsnack forward LINK 8888:jupyter  runsnack forward LINK\n"
      "With RUNSNACK_LINK set, leave LINK out: runsnack forward 11434 (a first word that is a port or has\n"
      "a ':' is then a TARGET; any other first word is still the LINK or a saved name).");
  cmd->callback([&status, args] {
    // With RUNSNACK_LINK set, a first word that is a port or has a ':' (and is no link) is a TARGET.
    const char* env = std::getenv("RUNSNACK_LINK");
    if (env && *env && looks_like_target(args->link)) {
      args->specs.insert(args->specs.begin(), args->link);
      args->link.clear();
    }
    run_command(status, [&] { return forward(*args); });
  });
}

}  // namespace runsnack::cli
