#include "pool/dashboard/http_routes.hpp"

#include <boost/beast/http/field.hpp>
#include <gtest/gtest.h>

namespace runsnack::pool::dashboard {
namespace {

namespace http = boost::beast::http;

Request get(const std::string& target, const std::string& host = "127.0.0.1:8080") {
  Request req(http::verb::get, target, 11);
  req.set(http::field::host, host);
  return req;
}

Request upgrade(const std::string& origin, const std::string& target = "/ws") {
  Request req = get(target);
  req.set(http::field::connection, "Upgrade");
  req.set(http::field::upgrade, "websocket");
  req.set(http::field::sec_websocket_key, "dGhlIHNhbXBsZSBub25jZQ==");
  req.set(http::field::sec_websocket_version, "13");
  if (!origin.empty()) req.set(http::field::origin, origin);
  return req;
}

const SnapshotFn kSnapshot = [] { return nlohmann::json{{"devices", nlohmann::json::array()}}; };

TEST(HttpRoutes, ServesThePageWithSecurityHeaders) {
  auto res = answer(get("/"), kSnapshot);
  EXPECT_EQ(res.result(), http::status::ok);
  EXPECT_EQ(res[http::field::content_type], "text/html; charset=utf-8");
  EXPECT_EQ(res["X-Content-Type-Options"], "nosniff");
  auto csp = std::string(res["Content-Security-Policy"]);
  EXPECT_NE(csp.find("default-src 'none'"), std::string::npos);
  EXPECT_NE(csp.find("script-src 'self'"), std::string::npos);
  EXPECT_EQ(csp.find("unsafe-inline"), std::string::npos);
  EXPECT_NE(res.body().find("<script src=\"dashboard.js\""), std::string::npos);
  EXPECT_EQ(answer(get("/dashboard.js"), kSnapshot)[http::field::content_type], "text/javascript; charset=utf-8");
  EXPECT_EQ(answer(get("/dashboard.css?v=1"), kSnapshot)[http::field::content_type], "text/css; charset=utf-8");
}

TEST(HttpRoutes, SnapshotIsTheCallbacksJsonUncached) {
  auto res = answer(get("/api/snapshot"), kSnapshot);
  EXPECT_EQ(res.result(), http::status::ok);
  EXPECT_EQ(res[http::field::content_type], "application/json");
  EXPECT_EQ(res[http::field::cache_control], "no-store");
  EXPECT_EQ(nlohmann::json::parse(res.body()), kSnapshot());
}

TEST(HttpRoutes, ASnapshotThatThrowsIsA500) {
  auto res = answer(get("/api/snapshot"), [] () -> nlohmann::json { throw std::runtime_error("db gone"); });
  EXPECT_EQ(res.result(), http::status::internal_server_error);
}

TEST(HttpRoutes, UnknownPathsAre404) {
  EXPECT_EQ(answer(get("/etc/passwd"), kSnapshot).result(), http::status::not_found);
  EXPECT_EQ(answer(get("/../CMakeLists.txt"), kSnapshot).result(), http::status::not_found);
}

TEST(HttpRoutes, OnlyGet) {
  Request post = get("/");
  post.method(http::verb::post);
  auto res = check_request(post, {});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->result(), http::status::method_not_allowed);
  EXPECT_EQ((*res)[http::field::allow], "GET");
  EXPECT_FALSE(check_request(get("/"), {}));
}

TEST(HttpRoutes, LoopbackServerAnswersOnlyLoopbackHosts) {
  for (const char* host : {"127.0.0.1:8080", "localhost:8080", "LOCALHOST", "[::1]:80", "a.localhost:1"})
    EXPECT_FALSE(check_request(get("/", host), {})) << host;
  for (const char* host : {"evil.example:8080", "", "127.0.0.1.evil.example", "[::2]:80"}) {
    auto res = check_request(get("/", host), {});
    ASSERT_TRUE(res) << host;
    EXPECT_EQ(res->result(), http::status::misdirected_request) << host;
  }
  EXPECT_FALSE(check_request(get("/", "pool.example:8080"), RouteOptions{.loopback_only = false}));
}

TEST(HttpRoutes, WebSocketOnlyFromThisOrigin) {
  EXPECT_TRUE(wants_websocket(upgrade("")));
  EXPECT_FALSE(wants_websocket(get("/ws")));
  EXPECT_FALSE(check_request(upgrade(""), {}));
  EXPECT_FALSE(check_request(upgrade("http://127.0.0.1:8080"), {}));
  auto res = check_request(upgrade("http://evil.example"), {});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->result(), http::status::forbidden);
}

// A TLS reverse proxy (--http-origin) in front of a loopback dashboard passes its own name as Host.
TEST(HttpRoutes, AnExtraOriginsHostAndOriginAreAccepted) {
  RouteOptions options;
  options.extra_origins = {"https://pool.example.org"};
  EXPECT_FALSE(check_request(get("/", "pool.example.org"), options));
  EXPECT_EQ(check_request(get("/", "evil.example"), options)->result(), http::status::misdirected_request);
  Request proxied = upgrade("https://pool.example.org");
  proxied.set(http::field::host, "pool.example.org");
  EXPECT_FALSE(check_request(proxied, options));
  EXPECT_EQ(check_request(upgrade("https://evil.example"), options)->result(), http::status::forbidden);
}

// Over TLS any Host is answered (the certificate defeats rebinding) and the page's origin is https://<Host>.
TEST(HttpRoutes, OverTlsTheOriginIsHttpsOfTheHost) {
  RouteOptions options;
  options.tls = true;
  EXPECT_FALSE(check_request(get("/", "pool.test"), options));
  EXPECT_FALSE(check_request(upgrade("https://127.0.0.1:8080"), options));
  EXPECT_EQ(check_request(upgrade("http://127.0.0.1:8080"), options)->result(), http::status::forbidden);
}

TEST(HttpRoutes, BrowserWorkerPageAndItsSocket) {
  auto res = answer(get("/join"), kSnapshot);
  EXPECT_EQ(res.result(), http::status::ok);
  EXPECT_EQ(res[http::field::content_type], "text/html; charset=utf-8");
  EXPECT_NE(res.body().find("<script src=\"join.js\""), std::string::npos);
  EXPECT_EQ(answer(get("/join.js"), kSnapshot).result(), http::status::ok);
  EXPECT_TRUE(wants_worker_socket(upgrade("", "/worker")));
  EXPECT_FALSE(wants_worker_socket(upgrade("", "/ws")));
  EXPECT_FALSE(wants_websocket(upgrade("", "/worker")));
  EXPECT_FALSE(wants_worker_socket(get("/worker")));
  // The worker socket, like /ws, only from this origin: another site's page cannot join a tab it lured.
  auto res2 = check_request(upgrade("http://evil.example", "/worker"), {});
  ASSERT_TRUE(res2);
  EXPECT_EQ(res2->result(), http::status::forbidden);
}

}  // namespace
}  // namespace runsnack::pool::dashboard
