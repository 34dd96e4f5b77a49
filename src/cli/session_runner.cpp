#include "cli/session_runner.hpp"

#include "cli/command.hpp"
#include "cli/link_arg.hpp"
#include "cli/state.hpp"
#include "consumer/consumer.hpp"
#include "consumer/reconnect.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <iostream>

namespace runsnack::cli {

namespace asio = boost::asio;

int run_session_command(const SessionCommand& command) {
  auto link = resolve_link(command.link_arg);
  if (!link) return report(link.error());
  auto identity = open_identity();
  if (!identity) return report(identity.error());
  auto consumer = Consumer::create(*identity);
  if (!consumer) return report(consumer.error());
  if (command.before_connect) command.before_connect();

  asio::io_context io(1);
  int exit_code = kExitFailure;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        ConnectOptions options;
        options.timeout = command.connect_timeout;
        options.served_by = command.served_by;
        ConnectOptions first = options;
        first.pipelined_proof = command.pipelined_proof;
        auto session = co_await (*consumer)->connect(*link, first);
        // The session lost last, held until the next body is done: its connection stays open
        // (MuxConfig::quiet_when_lost), so the provider hears no end from us before that body
        // re-attached (cmd_run.cpp).
        std::unique_ptr<Session> lost;
        while (true) {
          if (!session) {
            exit_code = report(session.error());
            co_return;
          }
          exit_code = co_await command.body(**session);
          if (exit_code != kReconnect) co_return;  // the body said why it reconnects
          ReconnectOptions again;
          again.connect = options;
          again.give_up = std::chrono::steady_clock::now() + command.reconnect_for;
          again.policy.retry_when_full = true;  // the session we lost may still hold its place there
          lost = std::move(*session);
          session = co_await reconnect(**consumer, *link, std::move(again));
        }
      },
      [&](std::exception_ptr e) {
        if (!e) return;
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          exit_code = report(std::string("internal error: ") + ex.what());
        }
      });
  io.run();
  return exit_code;
}

}  // namespace runsnack::cli
