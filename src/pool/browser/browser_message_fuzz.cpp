// libFuzzer: what a browser sends on the /worker WebSocket comes from any
// web page that reached the coordinator's HTTP port. Input: the first byte
// picks the parser (auth or worker request), the rest is the message text.
#include "pool/browser/browser_protocol.hpp"
#include "pool/device_runs.hpp"

#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, std::size_t size) {
  using namespace runsnack::pool::browser;
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    auto auth = parse_auth(text);
    if (!auth) return 0;
    if (auth->grant.empty() || auth->grant.size() > 64) __builtin_trap();
    // Random bytes never pass as a proof of a fixed key.
    if (verify_auth(*auth, runsnack::derive_grant_key("fuzz-secret"), "00")) __builtin_trap();
  } else {
    auto req = parse_request(text);
    if (req && (!req->is_object() || req->contains("frames"))) __builtin_trap();
    // A register's device.runs reaches the claim's SQL LIKE pattern: only [a-z0-9-] words, at most 16.
    if (req && req->contains("device")) {
      auto runs = runsnack::pool::parse_device_runs("wasm", (*req)["device"]);
      if (runs && (runs->needs.size() > runsnack::pool::kMaxDeviceRuns ||
                   runs->sql_list().find_first_not_of(",abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos))
        __builtin_trap();
      // A cap the coordinator keeps is a whole number of seconds in range (it is multiplied into ms).
      auto cap = runsnack::pool::parse_max_task_seconds((*req)["device"]);
      if (cap && *cap && (**cap < 1 || **cap > runsnack::pool::kMaxTaskSecondsLimit)) __builtin_trap();
    }
  }
  return 0;
}
