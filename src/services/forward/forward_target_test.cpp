#include "services/forward/forward_target.hpp"

#include <gtest/gtest.h>

namespace runsnack {
namespace {

TEST(ParseExpose, PortOnlyIsLoopback) {
  auto t = parse_expose("11434");
  ASSERT_TRUE(t) << t.error().what();
  EXPECT_EQ(t->name, "11434");
  EXPECT_EQ(t->host, "127.0.0.1");
  EXPECT_EQ(t->port, 11434);
  EXPECT_FALSE(t->host_header);
}

TEST(ParseExpose, NamedHostPortAndHostHeader) {
  auto t = parse_expose("ollama=localhost:11434,host-header");
  ASSERT_TRUE(t) << t.error().what();
  EXPECT_EQ(t->name, "ollama");
  EXPECT_EQ(t->host, "localhost");
  EXPECT_EQ(t->port, 11434);
  EXPECT_TRUE(t->host_header);
  auto v6 = parse_expose("db=[::1]:5432");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->address(), "[::1]:5432");
  auto named_port = parse_expose("web=8080");
  ASSERT_TRUE(named_port);
  EXPECT_EQ(named_port->host, "127.0.0.1");
}

TEST(ParseExpose, RejectsBadInput) {
  for (const char* bad : {"", "0", "65536", "x", "a=b", "=80", "a=host:", "a=host:99999", "80,nope", "a b=80",
                          "h:80", "a=::1:80", "a=[::1]80"})
    EXPECT_FALSE(parse_expose(bad)) << bad;
}

TEST(ParseForwardSpec, Forms) {
  auto a = parse_forward_spec("11434");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->bind, "127.0.0.1");
  EXPECT_FALSE(a->local_port);
  EXPECT_EQ(a->target, "11434");
  auto b = parse_forward_spec("8080:jupyter");
  ASSERT_TRUE(b);
  EXPECT_EQ(*b->local_port, 8080);
  EXPECT_EQ(b->target, "jupyter");
  auto c = parse_forward_spec("0.0.0.0:9000:80");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->bind, "0.0.0.0");
  EXPECT_EQ(*c->local_port, 9000);
  auto d = parse_forward_spec("[::1]:0:web");
  ASSERT_TRUE(d) << d.error().what();
  EXPECT_EQ(d->bind, "::1");
  EXPECT_EQ(*d->local_port, 0);
  for (const char* bad : {"", ":", "1:2:3:4", "x:80", "80:", "70000", "a b", "[::1]:80"})
    EXPECT_FALSE(parse_forward_spec(bad)) << bad;
}

TEST(ForwardTerms, RoundTripAndFind) {
  ForwardTerms terms;
  terms.targets.push_back(*parse_expose("11434"));
  terms.targets.push_back(*parse_expose("web=127.0.0.1:8080,host-header"));
  terms.max_connections = 7;
  auto back = parse_forward_terms(to_json(terms));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->targets, terms.targets);
  EXPECT_EQ(back->max_connections, 7);
  EXPECT_EQ(find_target(back->targets, "web")->port, 8080);
  EXPECT_EQ(find_target(back->targets, "8080")->name, "web");
  EXPECT_EQ(find_target(back->targets, "11434")->name, "11434");
  EXPECT_EQ(find_target(back->targets, "22"), nullptr);
  EXPECT_FALSE(parse_forward_terms(nlohmann::json{{"targets", {{{"name", "x"}, {"host", "h"}, {"port", 0}}}}}));
  EXPECT_FALSE(parse_forward_terms(nlohmann::json{{"max_connections", -1}}));
  EXPECT_TRUE(parse_forward_terms(nlohmann::json())->targets.empty());
}

TEST(ParseBandwidth, Units) {
  EXPECT_EQ(*parse_bandwidth("10mbit"), 1250000);
  EXPECT_EQ(*parse_bandwidth("500kbit"), 62500);
  EXPECT_EQ(*parse_bandwidth("1gbit"), 125000000);
  EXPECT_EQ(*parse_bandwidth("2MB"), 2000000);
  EXPECT_EQ(*parse_bandwidth("64KB/s"), 64000);
  EXPECT_EQ(*parse_bandwidth("1000"), 1000);
  EXPECT_EQ(*parse_bandwidth("1.5mbit"), 187500);
  for (const char* bad : {"", "mbit", "10 mbit", "10furlongs", "0", "-5", "0.1"}) EXPECT_FALSE(parse_bandwidth(bad)) << bad;
}

}  // namespace
}  // namespace runsnack
