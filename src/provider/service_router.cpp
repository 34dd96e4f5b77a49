#include "provider/service_router.hpp"

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
  return router;
}

}  // namespace runsnack
