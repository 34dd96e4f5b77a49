#pragma once
// `pool submit LINK train ...`: a training job (pool/trainer.hpp) from a script, initial
// weights and a data folder split into one shard per worker; --wait prints a line per round
// and leaves the final weights and every round's metrics in --out.

#include "cli/command.hpp"
#include "session/session.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace runsnack::cli {

struct TrainArgs {
  std::string script, init, data, resume, budget = "0", out;
  std::int64_t workers = 0, rounds = 10, local_steps = 50, seed = 1, round_timeout_s = 600;
  double outer_lr = 0.7, outer_momentum = 0.9, check_fraction = 0.1;
  bool wait = false, json = false;
  // Set once submitted: a reconnect after a lost session carries on waiting for it.
  std::shared_ptr<std::string> training = std::make_shared<std::string>();
};

boost::asio::awaitable<int> train_body(TrainArgs args, Session& session);

}  // namespace runsnack::cli
