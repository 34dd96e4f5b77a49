#pragma once
// run's sync and pull, cp's put and get, provider side (the stream modes are
// in exec_service.hpp; the transfer itself in fs/transfer.hpp). Each prepares
// the workspace first (launch.hpp: its quota image mounted, owned by the
// consumer's sandbox uid, so that what a sync writes belongs to the
// command), and does its file work off the io thread.
//
// Limits: a sync or put is bounded by the disk quota (the image, and the
// manifest's sizes checked first), and so is the run sync's state (kept in
// the image, workspace_projects.hpp; in memory: kept_sync_states.hpp); a pull or get by the grant's
// max_transfer_bytes (share --max-transfer, default 10 GB) of file data,
// checked before anything is hashed and again while it is sent. Refusals
// reach the consumer as an error frame and the audit log.

#include "services/exec/exec_service.hpp"

#include <boost/asio/awaitable.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace runsnack::exec {

// Every path the consumer names (cp's source or destination, --pull) is checked (path_rules.hpp)
// and resolved inside the workspace: a symlink on its way is followed while it stays inside; one
// that leads out, at any step, refuses the transfer with an audit record.

// Drops the run sync state this process keeps in memory for state `base` (launch.hpp
// Workspace::sync_state), when its workspace is removed. Frees it: call it off the io thread.
void forget_kept_sync_state(const std::filesystem::path& base);

// `whole`: the run sync of the whole workspace (remembered state, deletions); otherwise cp put into `dest`.
boost::asio::awaitable<void> serve_sync(std::shared_ptr<MuxStream> stream, ExecContext ctx, std::string dest, bool whole);
// cp stat: whether workspace/`path` is a folder (cp into an existing folder), as one control frame.
boost::asio::awaitable<void> serve_stat(std::shared_ptr<MuxStream> stream, ExecContext ctx, std::string path);

struct SendRequest {
  std::vector<std::string> paths;  // as the consumer named them, each sent with the folders above it
  std::string rename_as;           // cp get: the single path's top entry arrives under this name, alone
  bool folder = false;             // cp get of "PATH/": PATH must be a folder (a symlink to one is followed)
  std::string kind;                // the audit record: "pull", "cp_get"
};
// Workspace paths to the consumer.
boost::asio::awaitable<void> serve_send(std::shared_ptr<MuxStream> stream, ExecContext ctx, SendRequest req);

}  // namespace runsnack::exec
