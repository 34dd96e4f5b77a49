// The weights file: known bytes, round trips, and every bound and malformed layout refused with a clear
// error.
#include "pool/training/weights.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace runsnack::pool::training {
namespace {

std::string u64_le(std::uint64_t v) {
  std::string s;
  for (int i = 0; i < 8; ++i) s += static_cast<char>(v >> (8 * i) & 0xff);
  return s;
}

// A file from a header's JSON text and the data section's bytes.
std::string file(const std::string& header, const std::string& data) {
  return u64_le(header.size()) + header + data;
}

std::string floats(std::initializer_list<float> values) {
  std::string s;
  for (float f : values) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    for (int i = 0; i < 4; ++i) s += static_cast<char>(u >> (8 * i) & 0xff);
  }
  return s;
}

Weights sample() {
  Weights w;
  w.tensors["fc1.weight"] = {{2, 3}, {1, 2, 3, 4, 5, 6}};
  w.tensors["fc1.bias"] = {{2}, {-0.5f, 0.25f}};
  w.tensors["scale"] = {{}, {7}};     // a scalar
  w.tensors["empty"] = {{0, 4}, {}};  // zero values
  w.metadata["round"] = "3";
  return w;
}

std::string error_of(const Result<Weights>& r) { return r ? std::string("(parsed)") : r.error().message; }

TEST(Weights, KnownBytesParse) {
  const auto bytes =
      file(R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},)"
           R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"format":"pt"}}  )",
           floats({1.0f, -2.0f, 0.5f}));
  auto w = parse_weights(bytes);
  ASSERT_TRUE(w) << w.error().message;
  EXPECT_EQ(w->tensors.at("a"), (Tensor{{2}, {1.0f, -2.0f}}));
  EXPECT_EQ(w->tensors.at("b"), (Tensor{{1}, {0.5f}}));
  EXPECT_EQ(w->metadata.at("format"), "pt");
}

TEST(Weights, WriterKnownAnswer) {
  Weights w;
  w.tensors["b"] = {{1}, {0.5f}};
  w.tensors["a"] = {{2}, {1.0f, -2.0f}};
  auto bytes = encode_weights(w);
  ASSERT_TRUE(bytes);
  // Names sorted, compact JSON, padded with spaces so the data starts 8-aligned.
  const std::string header = R"({"a":{"data_offsets":[0,8],"dtype":"F32","shape":[2]},)"
                             R"("b":{"data_offsets":[8,12],"dtype":"F32","shape":[1]}})";
  const std::string padded = header + std::string((8 - header.size() % 8) % 8, ' ');
  EXPECT_EQ(*bytes, file(padded, floats({1.0f, -2.0f, 0.5f})));
  EXPECT_EQ((8 + padded.size()) % 8, 0u);
}

TEST(Weights, RoundTripKeepsEverything) {
  auto w = sample();
  auto bytes = encode_weights(w);
  ASSERT_TRUE(bytes) << bytes.error().message;
  auto back = parse_weights(*bytes);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, w);
}

TEST(Weights, EqualSetsWriteEqualBytes) {
  Weights a, b;
  a.tensors["x"] = {{1}, {1}};
  a.tensors["y"] = {{1}, {2}};
  b.tensors["y"] = {{1}, {2}};
  b.tensors["x"] = {{1}, {1}};
  EXPECT_EQ(encode_weights(a).value(), encode_weights(b).value());
}

TEST(Weights, NonFiniteValuesParse) {  // refusing them is the update checks' job, with the tensor named
  Weights w;
  w.tensors["x"] = {{2}, {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}};
  auto back = parse_weights(encode_weights(w).value());
  ASSERT_TRUE(back);
  EXPECT_TRUE(std::isnan(back->tensors.at("x").values[0]));
  EXPECT_TRUE(std::isinf(back->tensors.at("x").values[1]));
}

TEST(Weights, EveryTruncationFailsCleanly) {
  const auto bytes = encode_weights(sample()).value();
  for (std::size_t n = 0; n < bytes.size(); ++n) EXPECT_FALSE(parse_weights(bytes.substr(0, n))) << n;
  EXPECT_EQ(error_of(parse_weights(bytes.substr(0, 5))),
            "weights file is 5 bytes, too short for its 8-byte header length (not a safetensors file?)");
  EXPECT_NE(error_of(parse_weights(bytes.substr(0, 20))).find("truncated"), std::string::npos);
}

TEST(Weights, ShapeThatDisagreesWithItsDataNamesTheTensor) {
  auto r = parse_weights(file(R"({"fc1.weight":{"dtype":"F32","shape":[10,5],"data_offsets":[0,196]}})",
                              std::string(196, '\0')));
  EXPECT_EQ(error_of(r), "tensor 'fc1.weight': shape [10, 5] holds 50 values but its data is 196 bytes");
  EXPECT_TRUE(r.error().is(errc::malformed));
}

TEST(Weights, OnlyFloat32IsAccepted) {
  auto r =
      parse_weights(file(R"({"w":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", std::string(4, '\0')));
  EXPECT_NE(error_of(r).find("tensor 'w' is F16: only float32 (F32)"), std::string::npos) << error_of(r);
}

TEST(Weights, OffsetsMustTileTheData) {
  const std::string d12(12, '\0');
  auto overlap = parse_weights(file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                    d12));
  EXPECT_EQ(error_of(overlap), "tensors 'a' and 'b' overlap in the data (bytes 4 to 8)");
  auto gap = parse_weights(file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                                d12));
  EXPECT_EQ(error_of(gap), "weights data has 4 bytes before tensor 'b' that no tensor owns");
  auto trailing = parse_weights(file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", d12));
  EXPECT_NE(error_of(trailing).find("8 bytes after the last tensor"), std::string::npos);
  auto past = parse_weights(file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", d12));
  EXPECT_NE(error_of(past).find("not a range inside the 12 bytes"), std::string::npos);
  auto backwards = parse_weights(file(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", d12));
  EXPECT_NE(error_of(backwards).find("not a range"), std::string::npos);
}

TEST(Weights, MalformedHeadersAreRefused) {
  const std::string d4(4, '\0');
  const char* bad[] = {
      R"(not json)",
      R"([1,2])",
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})",     // unterminated
      R"({"a":[1]})",                                                 // entry not an object
      R"({"a":{"shape":[1],"data_offsets":[0,4]}})",                  // no dtype
      R"({"a":{"dtype":"F32","data_offsets":[0,4]}})",                // no shape
      R"({"a":{"dtype":"F32","shape":[1]}})",                         // no offsets
      R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})",   // negative size
      R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})",  // fractional size
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})",  // three offsets
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})",   // negative offset
      R"({"":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",     // empty name
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
      R"({"a":{"dtype":"F32","shape":[[1]],"data_offsets":[0,4]}})",  // nested deeper than safetensors
      R"({"__metadata__":{"k":1},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
      R"({"__metadata__":[],"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
  };
  for (const char* header : bad) {
    auto r = parse_weights(file(header, d4));
    ASSERT_FALSE(r) << header;
    EXPECT_TRUE(r.error().is(errc::malformed)) << header << ": " << r.error().message;
  }
  EXPECT_EQ(error_of(parse_weights(file(bad[12], d4))), "weights header names tensor 'a' twice");
}

TEST(Weights, DeepNestingIsRefusedWithoutRecursion) {
  const std::string deep = R"({"a":)" + std::string(200000, '[') + std::string(200000, ']') + "}";
  EXPECT_EQ(error_of(parse_weights(file(deep, ""))),
            "weights header nests deeper than a safetensors header does");
}

TEST(Weights, BoundsAreEnforced) {
  // Header over 1 MiB: refused from its length alone.
  auto big_header = parse_weights(u64_le(kMaxHeaderBytes + 1) + std::string(kMaxHeaderBytes + 1, ' '));
  ASSERT_FALSE(big_header);
  EXPECT_TRUE(big_header.error().is(errc::too_large));
  // Data over the caller's bound.
  auto bytes = encode_weights(sample()).value();
  auto over = parse_weights(bytes, 16);
  ASSERT_FALSE(over);
  EXPECT_TRUE(over.error().is(errc::too_large));
  EXPECT_NE(over.error().message.find("over this job's limit of 16"), std::string::npos);
  EXPECT_TRUE(parse_weights(bytes, 36));  // exactly its 36 bytes of data
  // Rank 9.
  auto rank = parse_weights(
      file(R"({"a":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}})", floats({1})));
  EXPECT_EQ(error_of(rank), "tensor 'a' has rank 9, over the limit of 8");
  // A name of 257 bytes.
  const std::string long_name(kMaxNameBytes + 1, 'n');
  auto name = parse_weights(
      file(R"({")" + long_name + R"(":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", floats({1})));
  ASSERT_FALSE(name);
  EXPECT_TRUE(name.error().is(errc::too_large));
  // Sizes whose product overflows 64 bits: refused before anything is allocated.
  auto huge = parse_weights(
      file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,4]}})", floats({1})));
  EXPECT_NE(error_of(huge).find("holds too many values to count but its data is 4 bytes"), std::string::npos)
      << error_of(huge);
  // But a zero size makes any other size empty.
  auto zero = parse_weights(
      file(R"({"a":{"dtype":"F32","shape":[0,9223372036854775807],"data_offsets":[0,0]}})", ""));
  ASSERT_TRUE(zero) << error_of(zero);
  EXPECT_EQ(zero->tensors.at("a").shape, (std::vector<std::int64_t>{0, 9223372036854775807}));
}

TEST(Weights, AtMost4096Tensors) {
  Weights w;
  for (std::size_t i = 0; i < kMaxTensors; ++i) w.tensors["t" + std::to_string(i)] = {{0}, {}};
  auto bytes = encode_weights(w);
  ASSERT_TRUE(bytes) << bytes.error().message;
  EXPECT_TRUE(parse_weights(*bytes));
  w.tensors["one.more"] = {{0}, {}};
  EXPECT_TRUE(encode_weights(w).error().is(errc::too_large));
  // A hand-made header with 4097 entries.
  std::string header = "{";
  for (std::size_t i = 0; i <= kMaxTensors; ++i)
    header += (i ? "," : "") + std::string(R"(")") + std::to_string(i) +
              R"(":{"dtype":"F32","shape":[0],"data_offsets":[0,0]})";
  auto r = parse_weights(file(header + "}", ""));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "weights file has more than 4096 tensors");
}

TEST(Weights, WriterRefusesWhatTheParserWould) {
  auto refused = [](Weights w) { return !encode_weights(w).has_value(); };
  EXPECT_TRUE(refused({{{"", {{1}, {1}}}}, {}}));
  EXPECT_TRUE(refused({{{"__metadata__", {{1}, {1}}}}, {}}));
  EXPECT_TRUE(refused({{{"\xff", {{1}, {1}}}}, {}}));  // not UTF-8
  EXPECT_TRUE(refused({{{"a", {{2}, {1}}}}, {}}));     // shape holds 2, one value
  EXPECT_TRUE(refused({{{"a", {{-1}, {}}}}, {}}));
  EXPECT_TRUE(refused({{{"a", {{1, 1, 1, 1, 1, 1, 1, 1, 1}, {1}}}}, {}}));
  EXPECT_TRUE(refused({{{std::string(kMaxNameBytes + 1, 'n'), {{1}, {1}}}}, {}}));
  EXPECT_TRUE(refused({{{"a", {{1}, {1}}}}, {{"k", "\xff"}}}));
  Weights big;
  big.tensors["a"] = {{5}, {1, 2, 3, 4, 5}};
  EXPECT_TRUE(encode_weights(big, 16).error().is(errc::too_large));
  EXPECT_TRUE(encode_weights(big, 20));
}

TEST(Weights, ElementCount) {
  EXPECT_EQ(element_count({}, 10), 1);
  EXPECT_EQ(element_count({2, 5}, 10), 10);
  EXPECT_EQ(element_count({2, 6}, 10), -1);
  EXPECT_EQ(element_count({-1}, 10), -1);
  EXPECT_EQ(element_count({std::numeric_limits<std::int64_t>::max(), 0}, 10), 0);
  EXPECT_EQ(element_count({1 << 30, 1 << 30, 1 << 30}, std::numeric_limits<std::uint64_t>::max()), -1);
}

}  // namespace
}  // namespace runsnack::pool::training
