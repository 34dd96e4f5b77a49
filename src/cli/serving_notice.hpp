#pragma once
// How `runsnack share` at a terminal finds the share that serves the machine's
// state (runsnack-share.service), so that the links it makes are served there
// (core/paths.hpp has the rule for when the machine's state applies).
//
// A share serving the machine's state publishes serving.json in it:
//   {"pid": 1234, "peer": "<PeerId>", "listen": "0.0.0.0:7443",
//    "candidates": ["192.0.2.7:7443", ...], "rendezvous": "HOST:PORT" | null}
// mode 0640 (group runsnack reads it; it holds no secret). The publisher keeps
// an exclusive flock on the file for as long as it serves, so a reader that
// can take the lock knows the file is stale (a share that crashed): the lock
// dies with the process, a pid check could be fooled by a reused pid.

#include "core/error.hpp"
#include "crypto/peer_id.hpp"
#include "link/endpoint.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace runsnack::cli {

inline constexpr const char* kServingFile = "serving.json";

struct ServingShare {
  long pid = 0;
  PeerId peer;
  std::string listen;
  std::vector<Endpoint> candidates;
  std::optional<Endpoint> rendezvous;
};

// Published for the life of the object; the destructor removes the file.
class ServingNotice {
 public:
  static Result<ServingNotice> publish(const std::filesystem::path& dir, const ServingShare& share);
  ServingNotice(ServingNotice&& other) noexcept;
  ServingNotice& operator=(ServingNotice&&) = delete;
  ServingNotice(const ServingNotice&) = delete;
  ~ServingNotice();

 private:
  ServingNotice(std::filesystem::path path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::filesystem::path path_;
  int fd_ = -1;
};

// The live share serving `dir`, if one is; nullopt when none published or the
// publisher is gone. Fails on a live notice that is not what a share writes,
// or that neither the folder's owner (the service's user) nor root wrote.
Result<std::optional<ServingShare>> find_serving_share(const std::filesystem::path& dir);

}  // namespace runsnack::cli
