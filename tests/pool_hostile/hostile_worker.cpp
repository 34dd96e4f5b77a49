// A hostile pool worker for the e2e tests (tests/e2e/test_pool_bank.py): it
// speaks the pool's wire protocol on a real session, with this
// installation's identity (RUNSNACK_HOME), and cheats in one of these ways:
//
//   bait-switch LINK   registers cheap (price 0.001, a modest score), takes a
//                      lease, re-registers at price 9.9e8 and score 9.9e14
//                      while holding it, waits a second and returns a forged
//                      result: it must be paid at most the leased price for
//                      the time.
//   forge-render LINK  returns well-formed render tiles (a valid PNG of the
//                      right size) with made-up pixels, as long as the pool
//                      gives it tiles: each must be rejected and unpaid.
//   claim-drop LINK    claims as many tasks as the pool gives (max 64 a
//                      claim, for about two seconds), then closes the
//                      session: a lost lease must not fail the task.
//   claim-hold LINK S  claims the same way, then keeps its leases alive with
//                      heartbeats for S seconds, claiming more meanwhile.
//
// One JSON event per line on stdout ({"event": "answer", ...} per result);
// exit 0 when it ran its course, 1 when the pool refused it, 2 on usage.
#include "cli/state.hpp"
#include "consumer/consumer.hpp"
#include "core/json_fields.hpp"
#include "link/link.hpp"
#include "pool/calibration.hpp"
#include "pool/pool_store.hpp"
#include "pool/render/png_codec.hpp"
#include "pool/render/tile_wire.hpp"
#include "pool/render/tiles.hpp"
#include "pool/wire.hpp"
#include "session/session.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <iostream>
#include <string>

namespace asio = boost::asio;
using json = nlohmann::json;
using namespace runsnack;

namespace {

void emit(const json& event) { std::cout << event.dump() << std::endl; }

asio::awaitable<void> sleep_ms(int ms) {
  asio::steady_timer t(co_await asio::this_coro::executor);
  t.expires_after(std::chrono::milliseconds(ms));
  co_await t.async_wait(asio::use_awaitable);
}

// One request, one answer (the answer as it came, refusals included).
asio::awaitable<Result<json>> call(MuxStream& stream, const json& request) {
  auto w = co_await write_stream_message(stream, request);
  if (!w) co_return w.error();
  co_return co_await read_stream_message(stream, pool::kMaxPoolMessageBytes);
}

struct Hostile {
  const Identity* identity = nullptr;
  MuxStream* stream = nullptr;

  // Registers a device; answers the coordinator's timed calibration when it asks for one.
  asio::awaitable<Result<json>> register_device(double price, double score, const json& holding) {
    auto pub = identity->public_key_raw();
    const json reg = {{"op", "register"},
                      {"public_key", pool::hex_encode({reinterpret_cast<const char*>(pub.data()), pub.size()})},
                      {"device", {{"kind", "cpu"}, {"name", "hostile"}, {"score", score}, {"price", price}}},
                      {"holding", holding}};
    auto r = co_await call(*stream, reg);
    if (!r) co_return r;
    emit({{"event", "registered"}, {"answer", *r}, {"price", price}, {"score", score}});
    if (r->contains("calibrate") && (*r)["calibrate"].is_object()) {
      const json& c = (*r)["calibrate"];
      const pool::CalibrationChallenge challenge{string_or(c, "seed"), int_or(c, "iterations", 0)};
      const json answer = {{"op", "calibrated"}, {"checkpoints", pool::answer_challenge(challenge)}};
      auto cal = co_await call(*stream, answer);
      if (!cal) co_return cal;
      emit({{"event", "calibrated"}, {"answer", *cal}});
    }
    co_return r;
  }

  // Claims until a task comes (or the pool refuses).
  asio::awaitable<Result<json>> claim_one() {
    for (int i = 0; i < 600; ++i) {
      const json claim = {{"op", "claim"}, {"max", 1}};
      auto r = co_await call(*stream, claim);
      if (!r) co_return r;
      if (!bool_or(*r, "ok", false)) co_return fail(errc::refused, string_or(*r, "error", "refused"));
      const json tasks = field_or(*r, "tasks", json::array());
      if (!tasks.empty() && tasks[0].is_object()) co_return tasks[0];
      co_await sleep_ms(static_cast<int>(int_or(*r, "retry_ms", 200)));
    }
    co_return fail(errc::timeout, "no task came");
  }

  asio::awaitable<Result<json>> send_result(const json& task, pool::TaskResult r) {
    const std::string id = string_or(task, "id");
    const std::int64_t attempt = int_or(task, "attempt", 0);
    auto bytes = pool::result_signing_bytes(id, attempt, r);
    auto sig = identity->sign(bytes);
    const json msg = {{"op", "result"},
                      {"task", id},
                      {"attempt", attempt},
                      {"exit_code", r.exit_code},
                      {"stdout", pool::base64_encode(r.stdout_data)},
                      {"files", r.files},
                      {"signature", sig ? pool::hex_encode({reinterpret_cast<const char*>(sig->data()), sig->size()}) : ""}};
    auto answer = co_await call(*stream, msg);
    if (answer) emit({{"event", "answer"}, {"task", id}, {"answer", *answer}});
    co_return answer;
  }
};

// (Awaited calls take named arguments: GCC 12 miscompiles temporaries in co_await expressions.)
asio::awaitable<int> bait_switch(Hostile& h) {
  const json none = json::array();
  auto cheap = co_await h.register_device(0.001, 5e7, none);
  if (!cheap || !bool_or(*cheap, "ok", false)) co_return 1;
  auto task = co_await h.claim_one();
  if (!task) {
    std::cerr << "hostile: " << task.error().what() << std::endl;
    co_return 1;
  }
  emit({{"event", "leased"}, {"task", (*task)["id"]}});
  // The switch: a price and a score far above the ones the lease was given at.
  const json holding = json::array({(*task)["id"]});
  auto dear = co_await h.register_device(9.9e8, 9.9e14, holding);
  if (!dear) co_return 1;
  co_await sleep_ms(1000);
  pool::TaskResult forged;
  forged.stdout_data = "forged\n";
  forged.files = json::array();
  auto answer = co_await h.send_result(*task, forged);
  co_return answer ? 0 : 1;
}

asio::awaitable<int> forge_render(Hostile& h, int max_tasks) {
  const json none = json::array();
  auto registered = co_await h.register_device(1, 5e7, none);
  if (!registered || !bool_or(*registered, "ok", false)) co_return 1;
  for (int n = 0; n < max_tasks; ++n) {
    auto task = co_await h.claim_one();
    if (!task) {
      emit({{"event", "refused"}, {"why", task.error().what()}});
      co_return 1;
    }
    const json spec = field_or(*task, "spec", json::object());
    auto tiles = render::split_tiles(static_cast<int>(int_or(spec, "width", 0)), static_cast<int>(int_or(spec, "height", 0)),
                                     static_cast<int>(int_or(spec, "tile", 0)), static_cast<int>(int_or(spec, "overlap", 0)));
    const auto index = int_or(*task, "shard", -1);
    if (!tiles || index < 0 || index >= static_cast<std::int64_t>(tiles->size())) co_return 2;
    const render::TileRect rect = (*tiles)[static_cast<std::size_t>(index)].rendered;
    // A plausible tile: the right size and format, mid-grey with a gradient, no rendering done.
    render::RgbImage image{rect.w, rect.h, std::vector<std::uint8_t>(static_cast<std::size_t>(rect.w) * rect.h * 3)};
    for (std::size_t i = 0; i < image.rgb.size(); ++i) image.rgb[i] = static_cast<std::uint8_t>(96 + i % 64);
    auto bytes = render::encode_tile_result(rect, image);
    if (!bytes) co_return 2;
    pool::TaskResult forged;
    forged.stdout_data = json{{"tile", index}, {"device", "cpu"}, {"compute_s", 0.5}}.dump() + "\n";
    forged.files = json::array({{{"path", "tile.bin"}, {"data", pool::base64_encode(*bytes)}}});
    auto answer = co_await h.send_result(*task, forged);
    if (!answer) co_return 1;
  }
  co_return 0;
}

// Claims for about `ms` milliseconds (max 64 each time) and returns how many tasks it holds.
asio::awaitable<Result<std::int64_t>> claim_all(Hostile& h, int ms, std::int64_t held) {
  for (int waited = 0; waited < ms;) {
    const json claim = {{"op", "claim"}, {"max", 64}};
    auto r = co_await call(*h.stream, claim);
    if (!r) co_return r.error();
    if (!bool_or(*r, "ok", false)) co_return fail(errc::refused, string_or(*r, "error", "refused"));
    const json tasks = field_or(*r, "tasks", json::array());
    held += static_cast<std::int64_t>(tasks.size());
    if (tasks.empty()) {
      const int pause = static_cast<int>(int_or(*r, "retry_ms", 200));
      co_await sleep_ms(pause);
      waited += pause;
    }
  }
  co_return held;
}

asio::awaitable<int> claim_and_drop(Hostile& h, int hold_s) {
  const json none = json::array();
  auto registered = co_await h.register_device(0, 5e7, none);
  if (!registered || !bool_or(*registered, "ok", false)) co_return 1;
  auto held = co_await claim_all(h, 2000, 0);
  if (!held) {
    emit({{"event", "refused"}, {"why", held.error().what()}});
    co_return 1;
  }
  for (int s = 0; s < hold_s; ++s) {
    const json heartbeat = {{"op", "heartbeat"}};
    if (auto hb = co_await call(*h.stream, heartbeat); !hb) co_return 1;
    auto more = co_await claim_all(h, 1000, *held);
    if (!more) co_return 1;
    held = more;
    emit({{"event", "holding"}, {"count", *held}});
  }
  emit({{"event", "held"}, {"count", *held}});
  co_return 0;  // the session closes with the process: every lease dropped
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: pool_hostile_worker bait-switch|forge-render|claim-drop|claim-hold LINK [MAX_TASKS|SECONDS]"
              << std::endl;
    return 2;
  }
  const std::string mode = argv[1];
  auto link = parse_link(argv[2]);
  if (!link) {
    std::cerr << "hostile: " << link.error().what() << std::endl;
    return 2;
  }
  const int max_tasks = argc > 3 ? std::atoi(argv[3]) : 1000;
  auto identity = cli::open_identity();
  if (!identity) {
    std::cerr << "hostile: " << identity.error().what() << std::endl;
    return 2;
  }
  auto consumer = Consumer::create(*identity);
  if (!consumer) return 2;
  asio::io_context io(1);
  int code = 1;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<int> {
        auto session = co_await (*consumer)->connect(*link);
        if (!session) {
          std::cerr << "hostile: " << session.error().what() << std::endl;
          co_return 1;
        }
        StreamHeader header;
        header.service = "pool-worker";
        auto stream = co_await (*session)->open(header);
        if (!stream) {
          std::cerr << "hostile: " << stream.error().what() << std::endl;
          co_return 1;
        }
        Hostile h{&*identity, stream->get()};
        if (mode == "bait-switch") co_return co_await bait_switch(h);
        if (mode == "forge-render") co_return co_await forge_render(h, max_tasks);
        if (mode == "claim-drop") co_return co_await claim_and_drop(h, 0);
        if (mode == "claim-hold") co_return co_await claim_and_drop(h, max_tasks);
        std::cerr << "hostile: unknown mode " << mode << std::endl;
        co_return 2;
      },
      [&](std::exception_ptr e, int rc) {
        if (e) {
          try {
            std::rethrow_exception(e);
          } catch (const std::exception& ex) {
            std::cerr << "hostile: " << ex.what() << std::endl;
          }
          return;
        }
        code = rc;
      });
  io.run();
  return code;
}
