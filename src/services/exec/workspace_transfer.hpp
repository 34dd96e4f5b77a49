#pragma once
// run's sync and pull, cp's put and get, provider side (the stream modes are
// in exec_service.hpp; the transfer itself in fs/transfer.hpp). Each prepares
// the workspace first (launch.hpp: its quota image mounted, owned by the
// consumer's sandbox uid, so that what a sync writes belongs to the
// command), and does its file work off the io thread.
//
// Limits: a sync or put is bounded by the disk quota (the image, and the
// manifest's sizes checked first); a pull or get by the grant's
// max_transfer_bytes (share --max-transfer, default 10 GB) of file data,
// checked before anything is hashed and again while it is sent. Refusals
// reach the consumer as an error frame and the audit log.

#include "services/exec/exec_service.hpp"

#include <boost/asio/awaitable.hpp>

#include <memory>
#include <string>
#include <vector>

namespace runsnack::exec {

// `whole`: the run sync of the whole workspace (remembered state, deletions); otherwise cp put into `dest`.
boost::asio::awaitable<void> serve_sync(std::shared_ptr<MuxStream> stream, ExecContext ctx, std::string dest, bool whole);
// `paths` of the workspace to the consumer; `rename_as` renames a single top-level path (cp get);
// `kind` names the audit record ("pull", "cp_get").
boost::asio::awaitable<void> serve_send(std::shared_ptr<MuxStream> stream, ExecContext ctx,
                                        std::vector<std::string> paths, std::string rename_as, std::string kind);

}  // namespace runsnack::exec
