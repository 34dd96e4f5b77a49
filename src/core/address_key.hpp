#pragma once
// The address a peer's connections count under, wherever something is
// bounded per address (the provider's admission, the pool dashboard's
// connection slots, the rendezvous' relay budgets): an IPv4 address as it is,
// an IPv6 address as its /64 (one subscriber's prefix), an IPv4-mapped IPv6
// address as the IPv4 one.

#include <boost/asio/ip/address.hpp>

#include <string>
#include <string_view>

namespace runsnack {

// "192.0.2.7" -> "192.0.2.7"; "2001:db8:1:2:a:b:c:d" -> "2001:db8:1:2::/64"; "::ffff:192.0.2.7" -> "192.0.2.7".
std::string address_key(const boost::asio::ip::address& address);
// The same for an address in text; text that is no address is its own key.
std::string address_key(std::string_view ip);

}  // namespace runsnack
