#include "pool/workload.hpp"

#include "pool/workloads/builtin.hpp"

namespace runsnack::pool {

const Workload* find_workload(std::string_view name) {
  static const auto exec = make_exec_workload();
  static const auto matmul = make_matmul_workload();
  if (name == exec->name()) return exec.get();
  if (name == matmul->name()) return matmul.get();
  return nullptr;
}

std::string workload_names() { return "exec, matmul"; }

}  // namespace runsnack::pool
