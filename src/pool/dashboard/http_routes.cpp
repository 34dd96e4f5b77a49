#include "pool/dashboard/http_routes.hpp"

#include "pool/dashboard/assets.hpp"

#include <boost/beast/http/field.hpp>
#include <boost/beast/websocket/rfc6455.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string_view>

namespace runsnack::pool::dashboard {

namespace http = boost::beast::http;

namespace {

// 'self' also covers ws:// to this origin (CSP level 3), which is how the page reaches /ws.
// 'wasm-unsafe-eval' lets the join page compile its WebAssembly kernels (/kernels.wasm), and
// nothing else: JavaScript eval stays refused.
constexpr const char* kContentSecurityPolicy =
    "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; worker-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

void add_common_headers(Response& res) {
  res.set(http::field::server, "runsnack-dashboard");
  res.set("X-Content-Type-Options", "nosniff");
  res.set("Content-Security-Policy", kContentSecurityPolicy);
  res.set("X-Frame-Options", "DENY");
  res.set("Referrer-Policy", "no-referrer");
  res.set("Cross-Origin-Opener-Policy", "same-origin");
  res.set("Cross-Origin-Resource-Policy", "same-origin");
}

std::string_view content_type(std::string_view path) {
  auto ends_with = [&](std::string_view ext) { return path.ends_with(ext); };
  if (ends_with(".html")) return "text/html; charset=utf-8";
  if (ends_with(".css")) return "text/css; charset=utf-8";
  if (ends_with(".js")) return "text/javascript; charset=utf-8";
  if (ends_with(".wasm")) return "application/wasm";
  if (ends_with(".png")) return "image/png";
  if (ends_with(".svg")) return "image/svg+xml";
  return "application/octet-stream";
}

Response ok(const Request& req, std::string_view type, std::string body, const char* cache) {
  Response res(http::status::ok, req.version());
  add_common_headers(res);
  res.set(http::field::content_type, type);
  res.set(http::field::cache_control, cache);
  res.keep_alive(req.keep_alive());
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

std::string_view path_of(std::string_view target) { return target.substr(0, target.find_first_of("?#")); }

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// "localhost", "x.localhost", "127.0.0.1", "[::1]", each with an optional port.
bool is_loopback_host(std::string_view host_header) {
  std::string host = lower(host_header);
  if (!host.empty() && host.front() == '[') {
    auto close = host.find(']');
    return close != std::string::npos && host.substr(1, close - 1) == "::1";
  }
  host = host.substr(0, host.find(':'));
  if (host == "localhost" || host.ends_with(".localhost")) return true;
  if (!host.starts_with("127.")) return false;
  return std::all_of(host.begin(), host.end(), [](char c) { return c == '.' || (c >= '0' && c <= '9'); });
}

// The host part of an origin: "https://pool.example.org:8443" -> "pool.example.org:8443".
std::string_view origin_host(std::string_view origin) {
  auto at = origin.find("://");
  return at == std::string_view::npos ? std::string_view() : origin.substr(at + 3);
}

bool host_of_extra_origin(std::string_view host_header, const RouteOptions& options) {
  const std::string host = lower(host_header);
  return std::any_of(options.extra_origins.begin(), options.extra_origins.end(),
                     [&](const std::string& o) { return origin_host(o) == host; });
}

bool accepted_origin(std::string_view origin_header, std::string_view host_header, const RouteOptions& options) {
  const std::string origin = lower(origin_header);
  if (origin == (options.tls ? "https://" : "http://") + lower(host_header)) return true;
  return std::find(options.extra_origins.begin(), options.extra_origins.end(), origin) != options.extra_origins.end();
}

}  // namespace

Result<std::string> normalize_origin(std::string_view text) {
  std::string origin = lower(text);
  if (origin.ends_with("/")) origin.pop_back();
  if (!origin.starts_with("https://") && !origin.starts_with("http://"))
    return fail(errc::invalid_argument, "bad origin '" + std::string(text) + "': expected https://HOST[:PORT]");
  const std::string_view host = origin_host(origin);
  if (host.empty() || host.find_first_of("/?#@ ") != std::string_view::npos)
    return fail(errc::invalid_argument,
                "bad origin '" + std::string(text) + "': expected https://HOST[:PORT], with no path");
  return origin;
}

Response error_response(http::status status, unsigned version, const std::string& text) {
  Response res(status, version);
  add_common_headers(res);
  res.set(http::field::content_type, "text/plain; charset=utf-8");
  res.set(http::field::cache_control, "no-store");
  res.keep_alive(false);
  res.body() = text + "\n";
  res.prepare_payload();
  return res;
}

std::optional<Response> check_request(const Request& req, const RouteOptions& options) {
  if (req.method() != http::verb::get) {
    auto res = error_response(http::status::method_not_allowed, req.version(), "only GET: the dashboard is read-only");
    res.set(http::field::allow, "GET");
    return res;
  }
  auto host = req[http::field::host];
  if (options.loopback_only && !options.tls && !is_loopback_host(host) && !host_of_extra_origin(host, options))
    return error_response(http::status::misdirected_request, req.version(), "this dashboard answers only to localhost");
  if (boost::beast::websocket::is_upgrade(req)) {
    auto origin = req[http::field::origin];
    if (!origin.empty() && !accepted_origin(origin, host, options))
      return error_response(http::status::forbidden, req.version(), "WebSocket from another origin");
  }
  return std::nullopt;
}

bool wants_websocket(const Request& req) {
  return path_of(req.target()) == "/ws" && boost::beast::websocket::is_upgrade(req);
}

bool wants_worker_socket(const Request& req) {
  return path_of(req.target()) == "/worker" && boost::beast::websocket::is_upgrade(req);
}

Response answer(const Request& req, const SnapshotFn& snapshot) {
  std::string_view path = path_of(req.target());
  if (path == "/api/snapshot") {
    std::string body;
    try {
      body = snapshot().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    } catch (const std::exception& e) {
      spdlog::warn("dashboard: snapshot: {}", e.what());
      return error_response(http::status::internal_server_error, req.version(), "snapshot failed");
    }
    return ok(req, "application/json", std::move(body), "no-store");
  }
  if (path == "/") path = "/index.html";
  if (path == "/join") path = "/join.html";
  for (const auto& asset : embedded_assets())
    if (asset.path == path) return ok(req, content_type(path), std::string(asset.bytes), "no-cache");
  auto res = error_response(http::status::not_found, req.version(), "not found");
  res.keep_alive(req.keep_alive());
  return res;
}

}  // namespace runsnack::pool::dashboard
