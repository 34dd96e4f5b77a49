#include "session/goodbye.hpp"

#include "session/message.hpp"

#include <algorithm>

namespace runsnack {

StreamHeader goodbye_header(const Goodbye& goodbye) {
  return {kServiceGoodbye, {{"ended", goodbye.ended}, {"message", goodbye.message.substr(0, kMaxGoodbyeMessage)}}};
}

Result<Goodbye> parse_goodbye(const StreamHeader& header) {
  if (header.service != kServiceGoodbye)
    return fail(errc::malformed, "a stream the provider opened that is not a goodbye ('" + header.service + "')");
  auto ended = get_string(header.args, "ended", 32);
  if (!ended) return ended.error();
  if (ended->empty() || !std::all_of(ended->begin(), ended->end(), [](char c) { return (c >= 'a' && c <= 'z') || c == '_'; }))
    return fail(errc::malformed, "goodbye: bad \"ended\"");
  auto message = get_string(header.args, "message", kMaxGoodbyeMessage);
  if (!message) return message.error();
  return Goodbye{std::move(*ended), std::move(*message)};
}

}  // namespace runsnack
