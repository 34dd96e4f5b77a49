#include "net/listener.hpp"

#include "net/tcp_tuning.hpp"

#include <boost/asio/ip/address.hpp>

#include <algorithm>
#include <charconv>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

namespace runsnack {

namespace asio = boost::asio;
using asio::ip::tcp;

Result<PortRange> parse_port_range(std::string_view text) {
  auto parse_port = [](std::string_view s) -> std::optional<std::uint16_t> {
    unsigned v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || v == 0 || v > 65535) return std::nullopt;
    return static_cast<std::uint16_t>(v);
  };
  auto dash = text.find('-');
  auto first = parse_port(text.substr(0, dash));
  auto last = dash == std::string_view::npos ? first : parse_port(text.substr(dash + 1));
  if (!first || !last || *last < *first)
    return fail(errc::invalid_argument, "bad port range '" + std::string(text) + "': expected A-B with 1 <= A <= B <= 65535");
  return PortRange{*first, *last};
}

Result<tcp::acceptor> listen_tcp(const asio::any_io_executor& ex, const std::string& address, PortRange range) {
  boost::system::error_code ec;
  auto ip = asio::ip::make_address(address, ec);
  if (ec) return fail(errc::invalid_argument, "bad listen address '" + address + "'");
  std::string last_error;
  for (std::uint32_t port = range.first; port <= range.last; ++port) {
    tcp::acceptor acceptor(ex);
    tcp::endpoint ep(ip, static_cast<std::uint16_t>(port));
    acceptor.open(ep.protocol(), ec);
    if (ec) return fail(errc::io_error, "cannot open a socket: " + ec.message());
    acceptor.set_option(tcp::acceptor::reuse_address(true));
    acceptor.bind(ep, ec);
    if (!ec) allow_fast_open(acceptor);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) return acceptor;
    last_error = ec.message();
  }
  if (range.first == range.last)
    return fail(errc::io_error, "cannot listen on " + address + ":" + std::to_string(range.first) + ": " + last_error);
  return fail(errc::exhausted, "no free port in " + std::to_string(range.first) + "-" + std::to_string(range.last) +
                                   " on " + address + " (" + last_error + "): widen --port-range");
}

std::vector<Endpoint> local_candidates(const tcp::endpoint& bound) {
  const auto port = bound.port();
  const auto addr = bound.address();
  if (!addr.is_unspecified()) return {Endpoint{addr.to_string(), port}};

  std::vector<Endpoint> v4, v6, loop;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) == 0) {
    for (ifaddrs* i = list; i; i = i->ifa_next) {
      if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
      if (i->ifa_addr->sa_family == AF_INET) {
        auto* sin = reinterpret_cast<sockaddr_in*>(i->ifa_addr);
        asio::ip::address_v4 a(ntohl(sin->sin_addr.s_addr));
        (a.is_loopback() ? loop : v4).push_back({a.to_string(), port});
      } else if (i->ifa_addr->sa_family == AF_INET6 && addr.is_v6()) {
        auto* sin6 = reinterpret_cast<sockaddr_in6*>(i->ifa_addr);
        asio::ip::address_v6::bytes_type b;
        std::copy(std::begin(sin6->sin6_addr.s6_addr), std::end(sin6->sin6_addr.s6_addr), b.begin());
        asio::ip::address_v6 a(b);
        if (a.is_link_local() || a.is_v4_mapped()) continue;
        (a.is_loopback() ? loop : v6).push_back({a.to_string(), port});
      }
    }
    ::freeifaddrs(list);
  }
  std::vector<Endpoint> out = v4;
  out.insert(out.end(), v6.begin(), v6.end());
  if (out.size() > 7) out.resize(7);  // keep links short; the first few are the useful ones
  // One loopback address is enough for a consumer on this machine.
  auto lo = std::find_if(loop.begin(), loop.end(), [](const Endpoint& e) { return e.host == "127.0.0.1"; });
  if (lo != loop.end()) out.push_back(*lo);
  return out;
}

}  // namespace runsnack
