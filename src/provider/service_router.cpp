#include "provider/service_router.hpp"

#include "services/cuda/cuda_service.hpp"
#include "services/forward/forward_service.hpp"
#include "services/exec/exec_service.hpp"
#include "services/exec/shell_service.hpp"
#include "services/info_service.hpp"

namespace runsnack {

ServiceRouter default_services() {
  ServiceRouter router;
  router.add(kServiceInfo, {[](std::shared_ptr<MuxStream> stream, const nlohmann::json&,
                               const ServiceContext& ctx) -> boost::asio::awaitable<void> {
                              co_await serve_info(*stream, ctx.grant);
                            },
                            kServiceInfo, true});
  router.add(kServiceProbe, {[](std::shared_ptr<MuxStream> stream, const nlohmann::json& args,
                                const ServiceContext&) -> boost::asio::awaitable<void> {
                               co_await serve_probe(*stream, args);
                             },
                             kServiceInfo, false});
  router.add(kServiceForward, {[forward = std::make_shared<SessionLimiter>()](std::shared_ptr<MuxStream> stream,
                                 const nlohmann::json& args, const ServiceContext& ctx) {
                                return serve_forward(forward, std::move(stream), args, ctx);
                              },
                              kServiceForward, false, true});
  // run (sync, exec, pull) and cp: services/exec/exec_service.hpp; they audit each command themselves.
  router.add(exec::kServiceRun, {exec::serve_run, exec::kServiceRun, true});
  router.add(exec::kServiceCp, {exec::serve_cp, exec::kServiceCp, true});
  router.add(exec::kServiceShell, {exec::serve_shell, exec::kServiceShell, true});
  // cuda: one cuda-server per stream; it audits each server itself (cuda_start, cuda_end).
  router.add(cuda::kServiceCuda, {[sessions = std::make_shared<SessionLimiter>()](
                                      std::shared_ptr<MuxStream> stream, const nlohmann::json& args,
                                      const ServiceContext& ctx) {
                                    return cuda::serve_cuda_stream(sessions, std::move(stream), args, ctx);
                                  },
                                  cuda::kServiceCuda, false});
  return router;
}

}  // namespace runsnack
