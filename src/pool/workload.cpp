#include "pool/workload.hpp"

#include "pool/workloads/builtin.hpp"

namespace runsnack::pool {

const Workload* find_workload(std::string_view name) {
  static const auto exec = make_exec_workload();
  static const auto matmul = make_matmul_workload();
  static const auto noop = make_noop_workload();
  static const auto render = make_render_workload();
  static const auto train_round = make_train_round_workload();
  for (const Workload* w : {exec.get(), matmul.get(), render.get(), noop.get(), train_round.get()})
    if (name == w->name()) return w;
  return nullptr;
}

std::string workload_names() { return "exec, matmul, render, noop"; }

}  // namespace runsnack::pool
