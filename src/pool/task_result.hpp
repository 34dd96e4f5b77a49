#pragma once
// A task's result as a worker signs it and the coordinator checks, stores
// and serves it.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace runsnack::pool {

struct TaskResult {
  std::int64_t exit_code = 0;
  std::string stdout_data;    // bounded by the caller
  std::string stderr_tail;    // the end of stderr when the command exited non-zero (kMaxStderrTailBytes); not compared
  nlohmann::json files;       // [{"path":..,"data":base64} or {"path":..,"frame":i}]
  std::string signature;      // hex Ed25519 signature over result_signing_bytes()
  std::vector<std::string> frames;  // raw bytes of the files with "frame" (wire.hpp); stored as base64
};

}  // namespace runsnack::pool
