#pragma once
// `--http ADDR` for the dashboard: "127.0.0.1:8080", "0.0.0.0:8080",
// "[::1]:8080", "localhost:8080", or a bare "8080" (loopback). Host names
// other than localhost are refused: the address is bound, not resolved.

#include "core/error.hpp"

#include <boost/asio/ip/tcp.hpp>

#include <string>
#include <string_view>

namespace runsnack::pool::dashboard {

Result<boost::asio::ip::tcp::endpoint> parse_http_address(std::string_view text);

// The URL a browser on this machine opens: "http://127.0.0.1:8080/"; an
// unspecified address (0.0.0.0, ::) shows as loopback.
std::string http_url(const boost::asio::ip::tcp::endpoint& endpoint);

}  // namespace runsnack::pool::dashboard
