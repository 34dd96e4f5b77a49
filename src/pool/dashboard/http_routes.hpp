#pragma once
// What the dashboard answers to one HTTP request, with no I/O (the server in
// dashboard.hpp reads and writes the bytes).
//
//   GET /               the page (www/index.html)      text/html
//   GET /<file>         its CSS and JS (www/)           text/css, text/javascript
//   GET /api/snapshot   the snapshot callback's JSON    application/json, no-store
//   GET /ws             WebSocket upgrade (wants_websocket)
//   GET /join           the browser worker's page (www/join.html; docs/BROWSER-WORKERS.md)
//   GET /worker         its WebSocket upgrade (wants_worker_socket), when pool serve serves browser workers
// Anything else: 404; a method other than GET: 405. Every answer carries
// nosniff, a Content-Security-Policy that allows only this origin (no inline
// script or style, no frames), no referrer, and Cache-Control.
//
// Host check (DNS rebinding): a server bound to loopback answers only a Host
// of localhost, 127.x.x.x or [::1], so a web page elsewhere cannot reach it
// through a name that resolves to 127.0.0.1. Over TLS any Host is answered:
// a rebinding page's browser expects a certificate for the attacker's name,
// which this server does not have, so it never gets a request through. The
// hosts of extra_origins are answered too (a reverse proxy's name). A
// WebSocket upgrade must come from this origin (Origin equal to
// http://<Host>, https://<Host> over TLS), from one of extra_origins, or
// from no page at all.

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <nlohmann/json.hpp>

#include "core/error.hpp"

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace runsnack::pool::dashboard {

using Request = boost::beast::http::request<boost::beast::http::string_body>;
using Response = boost::beast::http::response<boost::beast::http::string_body>;
using SnapshotFn = std::function<nlohmann::json()>;

struct RouteOptions {
  bool loopback_only = true;  // the server is bound to a loopback address
  bool tls = false;           // served over TLS: the page's origin is https://<Host>
  std::vector<std::string> extra_origins;  // "https://pool.example.org" (a TLS reverse proxy's)
};

// "https://Pool.Example.org/" -> "https://pool.example.org"; an error names
// what is wrong (no scheme, a path).
Result<std::string> normalize_origin(std::string_view origin);

// A refusal (405, 403, 400) for a request that must not be served, or nothing.
std::optional<Response> check_request(const Request& request, const RouteOptions& options);

bool wants_websocket(const Request& request);
bool wants_worker_socket(const Request& request);

// The answer to a checked GET that is not a WebSocket upgrade.
Response answer(const Request& request, const SnapshotFn& snapshot);

// A plain-text error with the security headers; the connection closes after it.
Response error_response(boost::beast::http::status status, unsigned version, const std::string& text);

}  // namespace runsnack::pool::dashboard
