#include "pool/dashboard/http_address.hpp"

#include <charconv>

namespace runsnack::pool::dashboard {

namespace asio = boost::asio;
using asio::ip::tcp;

Result<tcp::endpoint> parse_http_address(std::string_view text) {
  auto bad = [&](const char* why) {
    return fail(errc::invalid_argument,
                "bad --http '" + std::string(text.substr(0, 80)) + "': " + why + " (e.g. 127.0.0.1:8080)");
  };
  std::string_view host = "127.0.0.1", port_text = text;
  if (auto colon = text.rfind(':'); colon != std::string_view::npos) {
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    else if (host.find(':') != std::string_view::npos) return bad("an IPv6 address goes in brackets");
  }
  if (host == "localhost") host = "127.0.0.1";
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port_text.empty() || port > 65535)
    return bad("expected a port 0..65535");
  boost::system::error_code aec;
  auto address = asio::ip::make_address(std::string(host), aec);
  if (aec) return bad("expected an IP address");
  return tcp::endpoint(address, static_cast<unsigned short>(port));
}

std::string http_url(const tcp::endpoint& endpoint) {
  auto address = endpoint.address();
  if (address.is_unspecified())
    address = address.is_v6() ? asio::ip::address(asio::ip::address_v6::loopback())
                               : asio::ip::address(asio::ip::address_v4::loopback());
  std::string host = address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
  return "http://" + host + ":" + std::to_string(endpoint.port()) + "/";
}

}  // namespace runsnack::pool::dashboard
