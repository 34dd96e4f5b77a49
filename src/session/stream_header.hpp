#pragma once
// The first message on every multiplexed stream names the service it wants,
// and the provider answers before any bulk bytes flow:
//
//   opener   -> {"service":"info","args":{...}}
//   acceptor -> {"ok":true} | {"ok":false,"code":"refused","reason":"..."}
//
// Framing as in session/message.hpp.

#include "core/error.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace runsnack {

struct StreamHeader {
  std::string service;  // [a-z0-9_-]{1,32}
  nlohmann::json args = nlohmann::json::object();
};

struct StreamReply {
  bool ok = false;
  errc code = errc::ok;
  std::string reason;
};

nlohmann::json to_json(const StreamHeader& h);
Result<StreamHeader> parse_stream_header(const nlohmann::json& j);
nlohmann::json to_json(const StreamReply& r);
Result<StreamReply> parse_stream_reply(const nlohmann::json& j);

}  // namespace runsnack
