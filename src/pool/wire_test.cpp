// The worker wire's pieces (base64, binary frames, signed results) and the
// matmul checker reading tiles from either encoding.
#include "crypto/identity.hpp"
#include "pool/result_message.hpp"
#include "pool/wire.hpp"
#include "pool/workload.hpp"
#include "pool/matmul/matrix.hpp"

#include <gtest/gtest.h>

namespace runsnack::pool {
namespace {

TEST(Wire, Base64RoundTripsEveryLengthAndRejectsBadText) {
  std::string bytes;
  for (int len = 0; len < 40; ++len) {
    auto text = base64_encode(bytes);
    auto back = base64_decode(text);
    ASSERT_TRUE(back) << len;
    EXPECT_EQ(*back, bytes) << len;
    std::string into(bytes.size(), '\0');
    ASSERT_TRUE(base64_decode_into(text, into)) << len;
    EXPECT_EQ(into, bytes);
    bytes += static_cast<char>(len * 37 + 200);
  }
  EXPECT_FALSE(base64_decode("abc"));       // not a multiple of 4
  EXPECT_FALSE(base64_decode("ab$d"));      // outside the alphabet
  EXPECT_FALSE(base64_decode("a=cd"));      // padding inside
  EXPECT_FALSE(base64_decode("ab=d"));
  EXPECT_FALSE(base64_decode("a==="));
  EXPECT_FALSE(base64_decode("ab\ncd==="));
  std::string wrong(5, '\0');
  EXPECT_FALSE(base64_decode_into("YWJj", wrong));  // 3 bytes, not 5
}

TEST(Wire, Base64LongTextsRoundTripAndAnyBadCharacterFails) {
  // Lengths around multiples of 48 bytes (64 characters), every byte value,
  // and one bad character at every place of a 400-byte text.
  std::string bytes;
  for (int i = 0; i < 400; ++i) bytes += static_cast<char>(i * 131 + i / 256);
  for (std::size_t len : {45u, 48u, 49u, 50u, 51u, 93u, 96u, 97u, 98u, 99u, 189u, 192u, 193u, 400u}) {
    const std::string part = bytes.substr(0, len), text = base64_encode(part);
    auto back = base64_decode(text);
    ASSERT_TRUE(back) << len;
    EXPECT_EQ(*back, part) << len;
  }
  const std::string text = base64_encode(bytes);
  for (std::size_t at = 0; at + 4 < text.size(); ++at)
    for (char bad : {'$', '\n', '=', '-', '_', '\x80', '\xff', '\0', '@', '[', '`', '{', ':', '.'}) {
      std::string t = text;
      t[at] = bad;
      EXPECT_FALSE(base64_decode(t)) << at << " " << static_cast<int>(bad);
    }
  std::string edges = text;  // the ends of each range of the alphabet decode to their values
  edges.replace(0, 8, "AZaz09+/");
  auto back = base64_decode(edges);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->substr(0, 6), std::string("\x01\x96\xb3\xd3\xdf\xbf", 6));
}

TEST(Wire, FramesSplitExactlyAndWithinTheirBudget) {
  const std::string wire = frame_header(3) + "abc" + frame_header(0) + frame_header(2) + "de";
  auto frames = split_frames(wire, 3);
  ASSERT_TRUE(frames) << frames.error().what();
  EXPECT_EQ(*frames, (std::vector<std::string>{"abc", "", "de"}));
  EXPECT_FALSE(split_frames(wire, 2));                    // bytes after the last frame
  EXPECT_FALSE(split_frames(wire, 4));                    // one more than there is
  EXPECT_FALSE(split_frames(wire.substr(0, 5), 1));       // cut short
  EXPECT_FALSE(split_frames(wire, 3, 4));                 // 5 bytes over a budget of 4
  const std::string huge = frame_header(kMaxFrameBytes + 1);
  auto over = split_frames(huge, 1);
  ASSERT_FALSE(over);
  EXPECT_NE(over.error().what().find("over"), std::string::npos);
}

nlohmann::json framed_result(std::int64_t frames, nlohmann::json files) {
  return {{"op", "result"}, {"task", "t"}, {"attempt", 0}, {"exit_code", 0}, {"stdout", ""},
          {"files", std::move(files)}, {"signature", "00"}, {"frames", frames}};
}

TEST(Wire, ResultsAnnounceTheirFramesAndNameEachOnce) {
  using json = nlohmann::json;
  const json one = framed_result(1, json::array({{{"path", "tile.f32"}, {"frame", 0}}}));
  EXPECT_EQ(announced_frames(one).value(), 1u);
  const json batch = {{"op", "results"}, {"results", json::array({one, {{"op", "failed"}, {"frames", 9}}, one})}};
  EXPECT_EQ(announced_frames(batch).value(), 2u);  // a failure carries none
  EXPECT_EQ(announced_frames(json{{"op", "claim"}, {"frames", 5}}).value(), 0u);
  EXPECT_FALSE(announced_frames(framed_result(-1, json::array())));
  EXPECT_FALSE(announced_frames(framed_result(kMaxFramesPerResult + 1, json::array())));

  auto r = parse_result(one, {"raw bytes"});
  ASSERT_TRUE(r) << r.error().what();
  EXPECT_EQ(r->frames, std::vector<std::string>{"raw bytes"});
  inline_frames(*r);  // stored and served as base64
  EXPECT_TRUE(r->frames.empty());
  EXPECT_EQ(base64_decode(r->files[0]["data"].get<std::string>()).value(), "raw bytes");
  EXPECT_FALSE(r->files[0].contains("frame"));

  auto err = [](const json& req, std::vector<std::string> frames) {
    auto r = parse_result(req, std::move(frames));
    return r ? std::string("accepted") : r.error().what();
  };
  EXPECT_NE(err(one, {}).find("announced"), std::string::npos);
  EXPECT_NE(err(framed_result(1, json::array({{{"path", "a"}, {"frame", 1}}})), {"x"}).find("not there"), std::string::npos);
  EXPECT_NE(err(framed_result(2, json::array({{{"path", "a"}, {"frame", 0}}, {{"path", "b"}, {"frame", 0}}})), {"x", "y"})
                .find("already named"),
            std::string::npos);
  EXPECT_NE(err(framed_result(2, json::array({{{"path", "a"}, {"frame", 0}}})), {"x", "y"}).find("no file names"), std::string::npos);
  EXPECT_NE(err(framed_result(1, json::array({{{"path", "a"}, {"frame", 0}, {"data", ""}}})), {"x"}).find("one of them"),
            std::string::npos);
  EXPECT_NE(err(framed_result(1, json::array({{{"path", "../a"}, {"frame", 0}}})), {"x"}).find("path"), std::string::npos);
  EXPECT_NE(err(framed_result(1, json::array({{{"path", "a"}, {"frame", 0}}})), {std::string(kMaxOutFilesBytes + 17, 'x')})
                .find("limit"),
            std::string::npos);
}

TEST(Wire, SignaturesOfFramedResultsCoverTheFramesBytes) {
  TaskResult a;
  a.files = nlohmann::json::array({{{"path", "tile.f32"}, {"frame", 0}}});
  a.frames = {"0123"};
  TaskResult b = a;
  b.frames[0][2] ^= 0x20;
  EXPECT_NE(result_signing_bytes("t", 0, a), result_signing_bytes("t", 0, b));
  TaskResult plain;
  plain.files = nlohmann::json::array();
  const auto v1 = result_signing_bytes("t", 0, plain);
  EXPECT_EQ(std::string(v1.begin(), v1.begin() + 23), "runsnack-pool-result-v1");  // unframed results sign as before
  const auto v2 = result_signing_bytes("t", 0, a);
  EXPECT_EQ(std::string(v2.begin(), v2.begin() + 23), "runsnack-pool-result-v2");
}

TEST(MatmulChecker, ChecksTilesFromFramesAndFromBase64AndCatchesOneFlippedEntry) {
  const Workload* w = find_workload("matmul");
  ASSERT_NE(w, nullptr);
  const nlohmann::json spec = {{"source", "seed"}, {"seed", 3u}, {"m", 96}, {"k", 96}, {"p", 96}, {"block", 48}, {"rounds", 20},
                               {"tolerance", 1e-5}};
  auto checker = w->checker(spec, nlohmann::json::object());
  ASSERT_TRUE(checker) << checker.error().what();
  for (std::int64_t index = 0; index < 4; ++index) {
    const std::int64_t r0 = index / 2 * 48, c0 = index % 2 * 48;
    matmul::Matrix c = matmul::multiply_transposed(matmul::seeded_lines(3, 'A', 96, r0, 48), matmul::seeded_lines(3, 'B', 96, c0, 48));
    TaskResult framed;
    framed.files = nlohmann::json::array({{{"path", "tile.f32"}, {"frame", 0}}});
    framed.frames = {matmul::to_bytes(c)};
    EXPECT_TRUE((*checker)->check(index, framed).accepted) << index;
    TaskResult text;
    text.files = nlohmann::json::array({{{"path", "tile.f32"}, {"data", base64_encode(matmul::to_bytes(c))}}});
    EXPECT_TRUE((*checker)->check(index, text).accepted) << index;
    std::size_t at = static_cast<std::size_t>(index * 517) % c.data.size();
    while (std::fabs(c.data[at]) < 1) at = (at + 1) % c.data.size();
    framed.frames[0][at * 4 + 2] ^= 0x20;  // what RUNSNACK_POOL_FAULT=flip-bits does
    auto v = (*checker)->check(index, framed);
    EXPECT_FALSE(v.accepted) << index;
    EXPECT_NE(v.why.find("Freivalds"), std::string::npos) << v.why;
    framed.frames[0].pop_back();  // the wrong size
    EXPECT_FALSE((*checker)->check(index, framed).accepted);
  }
}

}  // namespace
}  // namespace runsnack::pool
