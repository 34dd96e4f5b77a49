#pragma once
// What `runsnack pool status|jobs|cancel|credits` print without --json: the
// coordinator's JSON reply as tables and sentences. Every string in a reply
// comes from the coordinator, a remote peer: printed escaped.

#include <nlohmann/json.hpp>

#include <ostream>
#include <string_view>

namespace runsnack::cli {

// `op` is the request's op ("status", "jobs", "cancel", "credits"); `job`
// the job it named, if any.
void print_pool_reply(std::string_view op, const nlohmann::json& reply, std::string_view job, std::ostream& out);

}  // namespace runsnack::cli
