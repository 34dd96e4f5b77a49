#include "sandbox/run_terms.hpp"

#include <gtest/gtest.h>

namespace runsnack::exec {
namespace {

TEST(RunTerms, ParseSize) {
  EXPECT_EQ(*parse_size("1000"), 1000u);
  EXPECT_EQ(*parse_size("4K"), 4096u);
  EXPECT_EQ(*parse_size("512M"), 512u * 1024 * 1024);
  EXPECT_EQ(*parse_size("1.5GiB"), 1536u * 1024 * 1024);
  EXPECT_FALSE(parse_size("lots"));
  EXPECT_FALSE(parse_size("-1G"));
  EXPECT_FALSE(parse_size("3X"));
}

TEST(RunTerms, JsonDefaultsAndRoundTrip) {
  RunTerms d = RunTerms::from_json(nullptr);
  EXPECT_EQ(d.max_procs, kDefaultMaxProcs);
  EXPECT_FALSE(d.network);
  RunTerms t = RunTerms::from_json({{"timeout_s", 5}, {"memory_bytes", 100}, {"max_procs", 7}, {"network", true},
                                    {"disk_quota_bytes", 9}});
  auto back = RunTerms::from_json(t.to_json());
  EXPECT_EQ(back.timeout_s, 5);
  EXPECT_EQ(back.memory_bytes, 100u);
  EXPECT_EQ(back.max_procs, 7u);
  EXPECT_EQ(back.disk_quota_bytes, 9u);
  EXPECT_TRUE(back.network);
  EXPECT_EQ(d.max_transfer_bytes, kDefaultMaxTransferBytes);
  EXPECT_EQ(RunTerms::from_json(RunTerms::from_json({{"max_transfer_bytes", 123}}).to_json()).max_transfer_bytes, 123u);
}

TEST(RunTerms, SizeAndSecondsText) {
  EXPECT_EQ(size_text(*parse_size("50M")), "50 MB");
  EXPECT_EQ(size_text(*parse_size("10G")), "10 GB");
  EXPECT_EQ(size_text(1536), "1.5 KB");
  EXPECT_EQ(size_text(100), "100 bytes");
  EXPECT_EQ(seconds_text(3), "3 s");
  EXPECT_EQ(seconds_text(0.5), "0.5 s");
  EXPECT_EQ(seconds_text(600), "10 min");
  EXPECT_EQ(seconds_text(7200), "2 h");
  EXPECT_EQ(seconds_text(90), "90 s");
  EXPECT_EQ(time_limit_text(3), "the command was stopped at its 3 s time limit");
}

TEST(RunTerms, ALimitHitSaysWhichAndHowMuch) {
  const nlohmann::json limits = {{"memory_bytes", 200u << 20}, {"max_procs", 20u}};
  EXPECT_EQ(limit_hit_text(false, false, true, limits), "");
  EXPECT_EQ(limit_hit_text(true, false, true, limits),
            "out of memory: the link allows 200 MB per command (the kernel killed it; the provider can allow more: "
            "share --memory)");
  EXPECT_EQ(limit_hit_text(true, false, false, limits).rfind("a process of the command ran out of memory: ", 0), 0u);
  EXPECT_EQ(limit_hit_text(false, true, true, limits),
            "the process limit was reached: the link allows 20 processes per command (a fork failed; the provider "
            "can allow more: share --max-procs)");
  EXPECT_NE(limit_hit_text(true, true, true, limits).find("; the process limit"), std::string::npos);
  EXPECT_EQ(limit_hit_text(true, false, true, nlohmann::json::object()),
            "out of memory (the kernel killed it; the provider can allow more: share --memory)");
}

}  // namespace
}  // namespace runsnack::exec
