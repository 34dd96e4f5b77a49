#pragma once
// Which network a worker connects from, for placing the copies of a quorum on
// independent machines (docs/SCHEDULER.md "Verification"): two copies on one
// network may share an operator, so a quorum counts as independent only when
// its copies ran on different networks as well as different PeerIds.
//
// A network is the address's IPv4 /24 ("203.0.113.0/24") or IPv6 /48
// ("2001:db8:7::/48"); an IPv4-mapped IPv6 address counts as IPv4. An
// address that is not a plain "IP:PORT" (a relayed session, whose real
// address the coordinator does not see) is "unknown": one network shared by
// all such workers, so the coordinator never claims a diversity it cannot see.

#include <string>
#include <string_view>
#include <vector>

namespace runsnack::pool::scheduling {

inline constexpr const char* kUnknownNetwork = "unknown";

// "IP:PORT" or "[IPv6]:PORT" (or a bare IP) -> its network.
std::string network_of(std::string_view address);

// A copy of a quorum was offered to a device on `mine`; `used` are the
// networks of the shard's other copies. Leave it (so that a device elsewhere
// takes it) when `mine` is among them and one of the devices free now is on
// a network none of the copies is on. Otherwise take it: a copy on another
// PeerId of the same network beats no copy at all.
bool leave_copy_for_another_network(const std::string& mine, const std::vector<std::string>& used,
                                    const std::vector<std::string>& free_now);

// How many different networks `networks` names.
std::size_t distinct_networks(std::vector<std::string> networks);

}  // namespace runsnack::pool::scheduling
