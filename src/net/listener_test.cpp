#include "net/listener.hpp"

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

namespace runsnack {
namespace {

TEST(PortRange, Parses) {
  auto r = parse_port_range("7000-7010").value();
  EXPECT_EQ(r.first, 7000);
  EXPECT_EQ(r.last, 7010);
  EXPECT_EQ(parse_port_range("8000").value().last, 8000);
  EXPECT_FALSE(parse_port_range("7010-7000"));
  EXPECT_FALSE(parse_port_range("0-10"));
  EXPECT_FALSE(parse_port_range("70000"));
  EXPECT_FALSE(parse_port_range("a-b"));
}

TEST(Listen, TakesTheNextFreePortInTheRange) {
  boost::asio::io_context io;
  auto first = listen_tcp(io.get_executor(), "127.0.0.1", {0, 0}).value();
  auto port = first.local_endpoint().port();
  ASSERT_LT(port, 65535);
  auto second = listen_tcp(io.get_executor(), "127.0.0.1", {port, static_cast<std::uint16_t>(port + 1)});
  if (second) {  // unless port+1 was taken by someone else
    EXPECT_EQ(second->local_endpoint().port(), port + 1);
  }
  auto exhausted = listen_tcp(io.get_executor(), "127.0.0.1", {port, port});
  ASSERT_FALSE(exhausted);
  EXPECT_FALSE(listen_tcp(io.get_executor(), "not-an-address", {0, 0}));
}

TEST(Candidates, BoundAddressOrInterfacesWithLoopbackLast) {
  boost::asio::ip::tcp::endpoint bound(boost::asio::ip::make_address("127.0.0.1"), 7443);
  auto only = local_candidates(bound);
  ASSERT_EQ(only.size(), 1u);
  EXPECT_EQ(only[0].str(), "127.0.0.1:7443");
  boost::asio::ip::tcp::endpoint any(boost::asio::ip::address_v4::any(), 7443);
  auto all = local_candidates(any);
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.back().host, "127.0.0.1");
  for (const auto& c : all) EXPECT_EQ(c.port, 7443);
}

}  // namespace
}  // namespace runsnack
