#include "cli/pool_dashboard.hpp"

#include "pool/dashboard/http_address.hpp"

#include <chrono>
#include <stdexcept>

namespace runsnack::cli {

namespace {

std::int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Result<void> PoolDashboard::start(boost::asio::any_io_executor ex, const std::string& address, pool::PoolStore& store,
                                  const std::vector<std::string>& tls, const std::vector<std::string>& origins) {
  auto endpoint = pool::dashboard::parse_http_address(address);
  if (!endpoint) return endpoint.error();
  pool::dashboard::DashboardOptions options;
  options.endpoint = *endpoint;
  for (const auto& origin : origins) {
    auto normal = pool::dashboard::normalize_origin(origin);
    if (!normal) return fail(errc::invalid_argument, "--http-origin: " + std::string(normal.error().what()));
    options.extra_origins.push_back(*normal);
  }
  if (!tls.empty()) {
    auto context = pool::dashboard::load_tls_context(tls.at(0), tls.at(1));
    if (!context) return context.error();
    options.tls = *context;
  }
  snapshot_.emplace(store);
  server_ = std::make_unique<pool::dashboard::Dashboard>(ex, options, [this] {
    auto snap = snapshot_->build(unix_ms_now());
    if (!snap) throw std::runtime_error(snap.error().what());  // the dashboard answers 500 and logs it
    return *snap;
  });
  return server_->listen();
}

void PoolDashboard::publish(const nlohmann::json& event) {
  if (!server_) return;
  snapshot_->observe(event);
  server_->publish(event);
}

nlohmann::json PoolDashboard::url() const { return server_ ? nlohmann::json(server_->url()) : nlohmann::json(nullptr); }

void PoolDashboard::stop() {
  if (server_) server_->stop();
}

}  // namespace runsnack::cli
