#include "services/cuda/server_env.hpp"

#include <map>

namespace runsnack::cuda {

namespace sfs = std::filesystem;

namespace {

bool is_shim_dir(const std::string& entry, const std::optional<sfs::path>& shim_dir) {
  sfs::path p = sfs::path(entry).lexically_normal();
  if (p.has_relative_path() && p.filename().empty()) p = p.parent_path();  // "dir/" -> "dir"
  if (p.filename() == kShimDirName) return true;
  if (!shim_dir) return false;
  std::error_code ec;
  if (sfs::equivalent(p, *shim_dir, ec)) return true;
  sfs::path s = shim_dir->lexically_normal();
  if (s.has_relative_path() && s.filename().empty()) s = s.parent_path();
  return p == s;
}

}  // namespace

std::string strip_shim_dirs(const std::string& library_path, const std::optional<sfs::path>& shim_dir) {
  std::string out;
  std::size_t start = 0;
  while (start <= library_path.size()) {
    std::size_t colon = library_path.find(':', start);
    if (colon == std::string::npos) colon = library_path.size();
    std::string entry = library_path.substr(start, colon - start);
    if (!entry.empty() && !is_shim_dir(entry, shim_dir)) out += (out.empty() ? "" : ":") + entry;
    start = colon + 1;
  }
  return out;
}

std::vector<std::string> server_environment(const std::vector<std::string>& environ,
                                            const std::optional<sfs::path>& shim_dir,
                                            const std::optional<std::vector<int>>& gpus) {
  std::map<std::string, std::string> env;
  for (const auto& e : environ) {
    auto eq = e.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    env.emplace(e.substr(0, eq), e.substr(eq + 1));
  }
  env.erase("RUNSNACK_CUDA_SOCKET");
  if (auto it = env.find("LD_LIBRARY_PATH"); it != env.end()) {
    it->second = strip_shim_dirs(it->second, shim_dir);
    if (it->second.empty()) env.erase(it);
  }
  if (gpus) {  // empty: no GPU visible, as exec's sandbox does
    std::string list;
    for (int g : *gpus) list += (list.empty() ? "" : ",") + std::to_string(g);
    env["CUDA_VISIBLE_DEVICES"] = list;
  }
  // CUDA then numbers GPUs as NVML, nvidia-smi and the grant's indices do.
  env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

std::vector<std::string> sandboxed_server_environment(const std::vector<std::string>& env) {
  static const char* const kPrefixes[] = {"LD_LIBRARY_PATH=", "CUDA_", "NVIDIA_", "__GL_", "RUNSNACK_CUDA_BACKEND=",
                                          "ASAN_OPTIONS=", "UBSAN_OPTIONS=", "LSAN_OPTIONS="};
  std::vector<std::string> out;
  for (const auto& e : env)
    for (const char* p : kPrefixes)
      if (e.starts_with(p)) {
        out.push_back(e);
        break;
      }
  return out;
}

}  // namespace runsnack::cuda
