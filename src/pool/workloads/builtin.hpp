#pragma once
// The built-in workloads (pool/workload.hpp), one file each.

#include "pool/workload.hpp"

#include <memory>

namespace runsnack::pool {

std::unique_ptr<Workload> make_exec_workload();
std::unique_ptr<Workload> make_matmul_workload();
std::unique_ptr<Workload> make_noop_workload();
std::unique_ptr<Workload> make_render_workload();
std::unique_ptr<Workload> make_train_round_workload();

// Helpers the workloads share.
// A folder's files as job input {"files":[{"path","data" (base64)}]}, at most `limit` bytes.
Result<nlohmann::json> read_input_dir(const std::string& dir, std::size_t limit);
// Writes `data` to path, creating folders; errors name the path.
Result<void> write_file(const std::filesystem::path& path, std::string_view data);
Result<std::string> read_file(const std::filesystem::path& path, std::size_t limit);

}  // namespace runsnack::pool
