#include "core/address_key.hpp"

#include <algorithm>

namespace runsnack {

std::string address_key(const boost::asio::ip::address& address) {
  if (address.is_v4()) return address.to_string();
  auto v6 = address.to_v6();
  if (v6.is_v4_mapped()) return boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, v6).to_string();
  auto bytes = v6.to_bytes();
  std::fill(bytes.begin() + 8, bytes.end(), 0);
  return boost::asio::ip::address_v6(bytes).to_string() + "/64";
}

std::string address_key(std::string_view ip) {
  boost::system::error_code ec;
  auto address = boost::asio::ip::make_address(ip, ec);
  return ec ? std::string(ip) : address_key(address);
}

}  // namespace runsnack
