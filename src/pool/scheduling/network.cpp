#include "pool/scheduling/network.hpp"

#include <boost/asio/ip/address.hpp>

#include <algorithm>
#include <cstdio>

namespace runsnack::pool::scheduling {

std::string network_of(std::string_view address) {
  std::string host(address);
  if (!host.empty() && host.front() == '[') {  // "[v6]:port"
    auto close = host.find(']');
    if (close == std::string::npos) return kUnknownNetwork;
    host = host.substr(1, close - 1);
  } else if (std::count(host.begin(), host.end(), ':') == 1) {  // "v4:port"
    host = host.substr(0, host.find(':'));
  }
  boost::system::error_code ec;
  auto ip = boost::asio::ip::make_address(host, ec);
  if (ec) return kUnknownNetwork;
  if (ip.is_v6() && ip.to_v6().is_v4_mapped())
    ip = boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, ip.to_v6());
  char text[64];
  if (ip.is_v4()) {
    auto b = ip.to_v4().to_bytes();
    std::snprintf(text, sizeof text, "%u.%u.%u.0/24", b[0], b[1], b[2]);
  } else {
    auto b = ip.to_v6().to_bytes();
    std::snprintf(text, sizeof text, "%x:%x:%x::/48", (b[0] << 8) | b[1], (b[2] << 8) | b[3], (b[4] << 8) | b[5]);
  }
  return text;
}

bool leave_copy_for_another_network(const std::string& mine, const std::vector<std::string>& used,
                                    const std::vector<std::string>& free_now) {
  auto in_use = [&used](const std::string& n) { return std::find(used.begin(), used.end(), n) != used.end(); };
  if (!in_use(mine)) return false;
  return std::any_of(free_now.begin(), free_now.end(), [&](const std::string& n) { return !in_use(n); });
}

std::size_t distinct_networks(std::vector<std::string> networks) {
  std::sort(networks.begin(), networks.end());
  return static_cast<std::size_t>(std::unique(networks.begin(), networks.end()) - networks.begin());
}

}  // namespace runsnack::pool::scheduling
