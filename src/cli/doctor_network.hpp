#pragma once
// `runsnack doctor`'s checks that wait on the network, each bounded: the
// router's port mapping (UPnP/NAT-PMP, in a thread: the libraries block), the
// NAT as a rendezvous sees it, and the path to a LINK (as `runsnack info`).

#include "cli/doctor_checks.hpp"
#include "link/endpoint.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <future>
#include <string>

namespace runsnack::cli::doctor {

// Asks the router to map TCP `port` for a minute and removes the mapping again. Runs in its own
// thread; the future is ready within the libraries' own bounds (NAT-PMP 2.5 s per request, UPnP
// discovery 1.5 s: about 5 s where no router answers).
std::future<Check> probe_router(std::uint16_t port);

// Registers a throwaway PeerId (no links) with the rendezvous twice, from two local ports, and
// compares the addresses it saw with ours: no NAT, a NAT that keeps ports, or one that changes them.
boost::asio::awaitable<Check> check_nat(Endpoint rendezvous, std::chrono::milliseconds timeout);

// Connects to LINK as `runsnack info` does (this user's identity) and reports the path, setup
// time, RTT and bandwidth, or why it failed and what to try.
boost::asio::awaitable<Check> check_link(std::string link_arg, std::chrono::milliseconds timeout);

}  // namespace runsnack::cli::doctor
