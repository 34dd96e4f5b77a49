#pragma once
// The run and cp services, provider side. Each stream's header args carry a
// "mode"; all bulk traffic uses the framed channel (fs/frame.hpp):
//
//   run {"mode":"sync"}                  consumer sends the tree (fs/transfer.hpp) into the workspace
//   run {"mode":"exec"}                  consumer -> {"type":"exec","argv":[..],"env":{..},"gpus":[..]|null,
//                                                     "timeout_s":N|null,"stdin":true|absent}
//                                        provider -> {"type":"started","limits":{..},"token":T} then out/err
//                                                    frames, {"type":"exit","status":N,"signal":S|null,
//                                                    "reason":"..","changed":{"files":N,"paths":[..],
//                                                    "complete":B}}, FIN ("changed": what the command
//                                                    left changed in the workspace, workspace_changes.hpp;
//                                                    absent from older providers)
//                                        consumer -> {"type":"signal","signal":2|9} at any time; its FIN or
//                                                    a session it closed kills the command; a session that
//                                                    went silent leaves it running for a re-attach;
//                                        with "stdin": stdin frames, windows and its end (stdin_relay.hpp;
//                                                    without, the command's stdin is /dev/null):
//   run {"mode":"attach","token":T,"out":N,"err":M}   the exec stream again from a new session
//                                        (detached_commands.hpp)
//   run {"mode":"pull","paths":[..]}     provider sends those workspace paths (fs/transfer.hpp)
//   cp  {"mode":"put","dest":D}          consumer sends a tree into workspace/D
//   cp  {"mode":"get","path":P,"as":N,"folder":B}
//                                        provider sends workspace/P (at any depth), its top entry renamed
//                                        N and without the folders above it; "folder": P must be one
//   cp  {"mode":"stat","path":P}         provider -> {"type":"stat","kind":"dir"|"file"|"link"|"other"|"none"}
//                                        (an older provider answers "unknown cp mode")
// Paths name workspace entries at any depth; a symlink on the way is followed while it stays
// inside the workspace (workspace_transfer.hpp).
//
// The workspace is <state dir>/workspaces/<consumer PeerId>; the command runs
// in the bubblewrap sandbox (sandbox.hpp) with the grant's limits
// (run_terms.hpp). Every command is written to the audit log (start, end,
// exit status, peak memory, CPU time).

#include "crypto/peer_id.hpp"
#include "link/grant.hpp"
#include "net/mux_stream.hpp"
#include "session/service.hpp"

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <string>

namespace runsnack::exec {

inline constexpr const char* kServiceRun = "run";
inline constexpr const char* kServiceCp = "cp";

// The run, cp and shell services' state per stream: the service contract
// (session/service.hpp) plus the workspace the stream works in.
struct ExecContext : ServiceContext {
  std::string workspace;  // the consumer's workspace (workspace_names.hpp); set from the stream's args
};

boost::asio::awaitable<void> serve_run(std::shared_ptr<MuxStream> stream, nlohmann::json args, ServiceContext context);
boost::asio::awaitable<void> serve_cp(std::shared_ptr<MuxStream> stream, nlohmann::json args, ServiceContext context);

}  // namespace runsnack::exec
