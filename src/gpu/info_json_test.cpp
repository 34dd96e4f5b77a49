#include "gpu/info_json.hpp"

#include <gtest/gtest.h>

namespace runsnack {
namespace {

using nlohmann::json;

GpuReport sample_report() {
  GpuReport r;
  r.nvml_loaded = true;
  r.driver_version = "555.42.06";
  r.cuda_version = "12.5";
  r.gpus.push_back({0, "Fake GPU 0", "GPU-0", 80ull << 30, 1ull << 30, 7, 41});
  r.gpus.push_back({1, "Fake GPU 1", "GPU-1", 24ull << 30, 0, -1, -1});
  r.note = "GPU 1: no utilization, temperature reported";
  return r;
}

TEST(InfoJson, GpuReportRoundTrip) {
  GpuReport r = sample_report();
  json j = r;
  EXPECT_EQ(j["gpus"][0]["memory_total"], 80ull << 30);
  EXPECT_EQ(j["gpus"][1]["utilization_pct"], -1);
  // Through text, as it travels.
  auto back = gpu_report_from_json(json::parse(j.dump()));
  ASSERT_TRUE(back) << back.error().what();
  EXPECT_EQ(back->nvml_loaded, r.nvml_loaded);
  EXPECT_EQ(back->driver_version, r.driver_version);
  EXPECT_EQ(back->cuda_version, r.cuda_version);
  EXPECT_EQ(back->note, r.note);
  ASSERT_EQ(back->gpus.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back->gpus[i].index, r.gpus[i].index);
    EXPECT_EQ(back->gpus[i].name, r.gpus[i].name);
    EXPECT_EQ(back->gpus[i].uuid, r.gpus[i].uuid);
    EXPECT_EQ(back->gpus[i].memory_total, r.gpus[i].memory_total);
    EXPECT_EQ(back->gpus[i].memory_used, r.gpus[i].memory_used);
    EXPECT_EQ(back->gpus[i].utilization_pct, r.gpus[i].utilization_pct);
    EXPECT_EQ(back->gpus[i].temperature_c, r.gpus[i].temperature_c);
  }
}

TEST(InfoJson, EmptyReportRoundTrip) {
  GpuReport r;
  r.note = "no NVIDIA GPU on this machine (libnvidia-ml.so.1 not found)";
  auto back = gpu_report_from_json(json(r));
  ASSERT_TRUE(back);
  EXPECT_FALSE(back->nvml_loaded);
  EXPECT_TRUE(back->gpus.empty());
  EXPECT_EQ(back->note, r.note);
}

TEST(InfoJson, HostInfoRoundTrip) {
  HostInfo h{
      "box",       "Debian GNU/Linux 12 (bookworm)", "Linux 6.1.0 x86_64", "AMD EPYC", 16, 128ull << 30,
      100ull << 30};
  json j = h;
  for (const char* key : {"hostname", "os", "kernel", "cpu_model", "cpu_count", "ram_total", "ram_available"})
    EXPECT_TRUE(j.contains(key)) << key;
  auto back = host_info_from_json(json::parse(j.dump()));
  ASSERT_TRUE(back) << back.error().what();
  EXPECT_EQ(back->hostname, h.hostname);
  EXPECT_EQ(back->os, h.os);
  EXPECT_EQ(back->kernel, h.kernel);
  EXPECT_EQ(back->cpu_model, h.cpu_model);
  EXPECT_EQ(back->cpu_count, h.cpu_count);
  EXPECT_EQ(back->ram_total, h.ram_total);
  EXPECT_EQ(back->ram_available, h.ram_available);
}

TEST(InfoJson, ToJsonEmitsOnlyWhatFromJsonAccepts) {
  GpuReport r = sample_report();
  r.driver_version =
      std::string(kInfoStringMaxBytes - 1, 'v') + "\xc3\xa9";  // a 2-byte char across the limit
  r.note = std::string(kInfoNoteMaxBytes + 10, 'n');
  r.gpus[0].name = "bad \xff bytes";
  r.gpus[0].utilization_pct = 250;
  r.gpus.resize(kMaxGpus + 3, r.gpus[1]);
  json j = r;
  std::string text;
  ASSERT_NO_THROW(text = j.dump());
  auto back = gpu_report_from_json(json::parse(text));
  ASSERT_TRUE(back) << back.error().what();
  EXPECT_EQ(back->driver_version, std::string(kInfoStringMaxBytes - 1, 'v'));
  EXPECT_EQ(back->note.size(), kInfoNoteMaxBytes);
  EXPECT_EQ(back->gpus[0].name, "bad ? bytes");
  EXPECT_EQ(back->gpus[0].utilization_pct, 100);
  EXPECT_EQ(back->gpus.size(), kMaxGpus);

  HostInfo h{"host\xfe", std::string(1000, 'o'), "k", "c", -5, 1, 1};
  auto host = host_info_from_json(json::parse(json(h).dump()));
  ASSERT_TRUE(host) << host.error().what();
  EXPECT_EQ(host->hostname, "host?");
  EXPECT_EQ(host->os.size(), kInfoStringMaxBytes);
  EXPECT_EQ(host->cpu_count, 0);
}

TEST(InfoJson, UnknownKeysIgnored) {
  json j = sample_report();
  j["future_field"] = {1, 2, 3};
  j["gpus"][0]["power_w"] = 300;
  EXPECT_TRUE(gpu_report_from_json(j));
}

void expect_rejected(const json& j, errc code, const std::string& why) {
  auto r = gpu_report_from_json(j);
  ASSERT_FALSE(r) << why;
  EXPECT_TRUE(r.error().is(code)) << why << ": " << r.error().what();
}

TEST(InfoJson, RejectsBadReports) {
  json good = sample_report();
  expect_rejected(json::array(), errc::malformed, "not an object");
  expect_rejected(nullptr, errc::malformed, "null");

  for (const char* key : {"nvml_loaded", "driver_version", "cuda_version", "gpus", "note"}) {
    json j = good;
    j.erase(key);
    expect_rejected(j, errc::malformed, std::string("missing ") + key);
  }
  auto with = [&](const std::string& pointer, json value) {
    json j = good;
    j[json::json_pointer(pointer)] = std::move(value);
    return j;
  };
  expect_rejected(with("/nvml_loaded", 1), errc::malformed, "bool as number");
  expect_rejected(with("/driver_version", 5), errc::malformed, "string as number");
  expect_rejected(with("/gpus", "x"), errc::malformed, "gpus not a list");
  expect_rejected(with("/gpus/0", "x"), errc::malformed, "gpu not an object");
  expect_rejected(with("/gpus/0/memory_total", -1), errc::malformed, "negative memory");
  expect_rejected(with("/gpus/0/memory_total", 1.5), errc::malformed, "fractional memory");
  expect_rejected(with("/gpus/0/utilization_pct", 101), errc::malformed, "utilization over 100");
  expect_rejected(with("/gpus/0/utilization_pct", -2), errc::malformed, "utilization under -1");
  expect_rejected(with("/gpus/0/index", -1), errc::malformed, "negative index");
  expect_rejected(with("/gpus/0/index", 1ull << 40), errc::malformed, "index over int");
  expect_rejected(with("/gpus/1/name", nullptr), errc::malformed, "null name");
  expect_rejected(with("/driver_version", std::string(kInfoStringMaxBytes + 1, 'x')), errc::too_large,
                  "long string");
  expect_rejected(with("/note", std::string(kInfoNoteMaxBytes + 1, 'x')), errc::too_large, "long note");

  json many = good;
  many["gpus"] = json::array();
  for (std::size_t i = 0; i <= kMaxGpus; ++i) many["gpus"].push_back(good["gpus"][0]);
  expect_rejected(many, errc::too_large, "too many gpus");
}

TEST(InfoJson, RejectsBadHost) {
  json good = HostInfo{"box", "os", "k", "cpu", 4, 1, 1};
  EXPECT_TRUE(host_info_from_json(good));
  json j = good;
  j["cpu_count"] = -3;
  EXPECT_FALSE(host_info_from_json(j));
  j = good;
  j["hostname"] = std::string(kInfoStringMaxBytes + 1, 'h');
  EXPECT_FALSE(host_info_from_json(j));
  j = good;
  j.erase("ram_total");
  EXPECT_FALSE(host_info_from_json(j));
  EXPECT_FALSE(host_info_from_json("host"));
}

}  // namespace
}  // namespace runsnack
