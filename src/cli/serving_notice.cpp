#include "cli/serving_notice.hpp"

#include "core/json_fields.hpp"
#include "core/paths.hpp"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace runsnack::cli {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kMaxNoticeBytes = 16 * 1024;

nlohmann::json to_json(const ServingShare& s) {
  nlohmann::json candidates = nlohmann::json::array();
  for (const auto& c : s.candidates) candidates.push_back(c.str());
  return {{"pid", s.pid},
          {"peer", s.peer.str()},
          {"listen", s.listen},
          {"candidates", candidates},
          {"rendezvous", s.rendezvous ? nlohmann::json(s.rendezvous->str()) : nlohmann::json(nullptr)}};
}

Result<ServingShare> from_json(const nlohmann::json& j, const fs::path& path) {
  auto bad = [&](const std::string& why) { return fail(errc::malformed, path.string() + ": " + why); };
  if (!j.is_object()) return bad("not a JSON object");
  ServingShare s;
  s.pid = static_cast<long>(int_or(j, "pid", 0));
  auto peer = PeerId::parse(string_or(j, "peer"));
  if (!peer) return bad(peer.error().what());
  s.peer = *peer;
  s.listen = string_or(j, "listen");
  if (j.contains("candidates") && j["candidates"].is_array()) {
    for (const auto& c : j["candidates"]) {
      if (!c.is_string()) return bad("a candidate is not a string");
      auto ep = parse_endpoint(c.get<std::string>(), "candidate");
      if (!ep) return bad(ep.error().what());
      s.candidates.push_back(*ep);
    }
  }
  if (std::string rdv = string_or(j, "rendezvous"); !rdv.empty()) {
    auto ep = parse_endpoint(rdv, "rendezvous");
    if (!ep) return bad(ep.error().what());
    s.rendezvous = *ep;
  }
  return s;
}

}  // namespace

Result<ServingNotice> ServingNotice::publish(const fs::path& dir, const ServingShare& share) {
  fs::path path = dir / kServingFile;
  fs::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  // Locked before it gets its name, so a reader never finds it unlocked while we live.
  int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (fd < 0) return fail(errc::io_error, "cannot write " + tmp.string() + ": " + std::strerror(errno));
  ::fchmod(fd, 0640);
  std::string text = to_json(share).dump() + "\n";
  bool ok = ::flock(fd, LOCK_EX | LOCK_NB) == 0 &&
            ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            ::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return fail(errc::io_error, "cannot publish " + path.string() + ": " + std::strerror(err));
  }
  return ServingNotice(path, fd);
}

ServingNotice::ServingNotice(ServingNotice&& other) noexcept : path_(std::move(other.path_)), fd_(other.fd_) {
  other.fd_ = -1;
}

ServingNotice::~ServingNotice() {
  if (fd_ < 0) return;
  // Only our own file: a newer share may have replaced it.
  struct stat ours {}, named {};
  if (::fstat(fd_, &ours) == 0 && ::stat(path_.c_str(), &named) == 0 && ours.st_ino == named.st_ino &&
      ours.st_dev == named.st_dev)
    ::unlink(path_.c_str());
  ::close(fd_);
}

Result<std::optional<ServingShare>> find_serving_share(const fs::path& dir) {
  fs::path path = dir / kServingFile;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return std::optional<ServingShare>();
  struct stat file {}, folder {};
  bool stated = ::fstat(fd, &file) == 0 && ::stat(dir.c_str(), &folder) == 0;
  bool live = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  if (!live) return std::optional<ServingShare>();
  // The folder is shared with a group: only its owner's (the service's) or root's notice counts,
  // so that one member cannot send another's links to an address and PeerId of his own.
  if (!stated || (file.st_uid != folder.st_uid && file.st_uid != 0))
    return fail(errc::refused, path.string() + " was written by uid " + std::to_string(file.st_uid) +
                                   ", not by the folder's owner: it is not the service's; remove it");
  auto text = read_file(path, kMaxNoticeBytes);
  if (!text) return std::optional<ServingShare>();  // removed in between: the share just stopped
  auto j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  auto share = from_json(j, path);
  if (!share) return share.error();
  return std::optional<ServingShare>(std::move(*share));
}

}  // namespace runsnack::cli
