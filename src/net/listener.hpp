#pragma once
// Opening the provider's listening socket, within a port range when the user
// confines it (`--port-range A-B`), and listing the addresses a link should
// carry as direct candidates.

#include "core/error.hpp"
#include "link/link.hpp"

#include <boost/asio/ip/tcp.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace runsnack {

struct PortRange {
  std::uint16_t first = 0;  // 0..0: any free port
  std::uint16_t last = 0;
};

Result<PortRange> parse_port_range(std::string_view text);  // "7000-7010" or "7000"

// Binds `address` (e.g. "0.0.0.0", "::", "127.0.0.1") on the first free port
// of `range` and listens. errc::exhausted when every port in the range is taken.
Result<boost::asio::ip::tcp::acceptor> listen_tcp(const boost::asio::any_io_executor& ex,
                                                  const std::string& address, PortRange range);

// Usable local addresses for a link: for a wildcard listener every up,
// non-link-local interface address (IPv4 first, loopback last so that a
// consumer on the same machine still finds us); otherwise the bound address.
std::vector<Endpoint> local_candidates(const boost::asio::ip::tcp::endpoint& bound);

}  // namespace runsnack
