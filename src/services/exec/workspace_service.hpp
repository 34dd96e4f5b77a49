#pragma once
// A consumer's own workspaces on this provider (workspace_projects.hpp), as
// two stream modes of run and cp: "workspaces" answers one control frame
// {"type":"workspaces","workspaces":[{"name","bytes","last_used","in_use"}],
// "quota_bytes"}; "remove" (with "name") deletes one, audited, and answers
// {"type":"removed","name"}. A consumer sees and removes only its own.

#include "services/exec/exec_service.hpp"

#include <boost/asio/awaitable.hpp>

#include <memory>

namespace runsnack::exec {

boost::asio::awaitable<void> serve_workspaces(std::shared_ptr<MuxStream> stream, ExecContext ctx, nlohmann::json args);

}  // namespace runsnack::exec
