#include "cuda/wire.hpp"

#include <gtest/gtest.h>

namespace runsnack::cuda::wire {
namespace {

TEST(CudaWire, FramesRoundTripAndCoalesce) {
  std::vector<std::uint8_t> buf;
  Writer w(buf);
  w.frame(Op::MemAlloc, kFlagReply, 7);
  w.u64(0x1122334455667788ull);
  w.u64(4096);
  w.finish();
  w.frame(Op::ModuleGetFunction, kFlagReply, 8);
  w.u64(5);
  w.str("vecAdd");
  w.array(std::vector<Param>{{0, 8}, {8, 4}});
  w.finish();

  Header h;
  ASSERT_EQ(decode_header(buf.data(), h), "");
  EXPECT_EQ(h.op, Op::MemAlloc);
  EXPECT_EQ(h.flags, kFlagReply);
  EXPECT_EQ(h.seq, 7u);
  ASSERT_EQ(h.length, 16u);
  Reader r(buf.data() + kHeaderSize, h.length);
  EXPECT_EQ(r.u64(), 0x1122334455667788ull);
  EXPECT_EQ(r.u64(), 4096u);
  EXPECT_TRUE(r.at_end());
  EXPECT_FALSE(r.failed());

  const std::uint8_t* second = buf.data() + kHeaderSize + h.length;
  ASSERT_EQ(decode_header(second, h), "");
  EXPECT_EQ(h.op, Op::ModuleGetFunction);
  EXPECT_EQ(h.seq, 8u);
  Reader r2(second + kHeaderSize, h.length);
  EXPECT_EQ(r2.u64(), 5u);
  EXPECT_EQ(r2.str(), "vecAdd");
  auto params = r2.array<Param>(kMaxParams);
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[1].offset, 8u);
  EXPECT_EQ(params[1].size, 4u);
  EXPECT_TRUE(r2.at_end());
  EXPECT_EQ(second + kHeaderSize + h.length, buf.data() + buf.size());
}

TEST(CudaWire, LittleEndianLayout) {
  std::vector<std::uint8_t> buf;
  Writer w(buf);
  w.frame(Op::Sync, kFlagReply, 0x01020304);
  w.u32(0xa1b2c3d4);
  w.finish();
  std::vector<std::uint8_t> want = {4, 0, 0, 0, static_cast<std::uint8_t>(Op::Sync), 0, 1, 0, 4, 3, 2, 1,
                                    0xd4, 0xc3, 0xb2, 0xa1};
  EXPECT_EQ(buf, want);
}

TEST(CudaWire, RejectsOversizedUnknownAndBadFlags) {
  std::uint8_t head[kHeaderSize];
  encode_header(Header{static_cast<std::uint32_t>(kMaxPayload + 1), Op::MemcpyHtoD, 0, 1}, head);
  Header h;
  EXPECT_NE(decode_header(head, h).find("exceeds the limit"), std::string::npos);
  encode_header(Header{0, static_cast<Op>(999), 0, 1}, head);
  EXPECT_NE(decode_header(head, h).find("unknown op 999"), std::string::npos);
  encode_header(Header{0, Op::Sync, 0x80, 1}, head);
  EXPECT_NE(decode_header(head, h).find("unknown flags"), std::string::npos);
  encode_header(Header{static_cast<std::uint32_t>(kMaxPayload), Op::MemcpyHtoD, 0, 1}, head);
  EXPECT_EQ(decode_header(head, h), "");
}

TEST(CudaWire, ReaderFailsPastTheEndWithoutOverrun) {
  std::vector<std::uint8_t> buf;
  Writer w(buf);
  w.u32(100);  // claims a 100-byte string that is not there
  w.u16(1);
  Reader r(buf.data(), buf.size());
  EXPECT_EQ(r.str(), "");
  EXPECT_TRUE(r.failed());
  Reader r2(buf.data(), 3);
  EXPECT_EQ(r2.u32(), 0u);
  EXPECT_TRUE(r2.failed());
  std::vector<std::uint8_t> arr;
  Writer w2(arr);
  w2.u32(0xffffffff);
  Reader r3(arr.data(), arr.size());
  EXPECT_TRUE(r3.array<Param>(kMaxParams).empty());
  EXPECT_TRUE(r3.failed());
}

TEST(CudaWire, DeviceInfoRoundTrip) {
  DeviceInfo d;
  d.name = "NVIDIA H200";
  for (int i = 0; i < 16; ++i) d.uuid[i] = static_cast<std::uint8_t>(i * 3);
  d.total_mem = 150ull << 30;
  d.attributes = {0, 1024, 7, -1};
  std::vector<std::uint8_t> buf;
  Writer w(buf);
  write_device(w, d);
  Reader r(buf.data(), buf.size());
  DeviceInfo e = read_device(r);
  EXPECT_FALSE(r.failed());
  EXPECT_EQ(e.name, d.name);
  EXPECT_EQ(std::memcmp(e.uuid, d.uuid, 16), 0);
  EXPECT_EQ(e.total_mem, d.total_mem);
  EXPECT_EQ(e.attributes, d.attributes);
}

TEST(CudaWire, ImageSizeOfSyntheticFatbinWrapperAndPtx) {
  // A fatbin header (magic, version, header size, fat size) then its body.
  std::vector<std::uint8_t> fat(16 + 48, 0xee);
  std::uint32_t magic = 0xBA55ED50;
  std::uint16_t version = 1, header = 16;
  std::uint64_t size = 48;
  std::memcpy(fat.data(), &magic, 4);
  std::memcpy(fat.data() + 4, &version, 2);
  std::memcpy(fat.data() + 6, &header, 2);
  std::memcpy(fat.data() + 8, &size, 8);
  EXPECT_EQ(image_size(fat.data()), 64u);
  struct {
    std::int32_t magic, version;
    const void* data;
    const void* rest;
  } wrapper{static_cast<std::int32_t>(0x466243B1), 1, fat.data(), nullptr};
  EXPECT_EQ(unwrap_fatbin(&wrapper), fat.data());
  EXPECT_EQ(image_size(&wrapper), 64u);
  const char* ptx = "//\n.version 8.0\n.target sm_90\n";
  EXPECT_EQ(image_size(ptx), std::strlen(ptx) + 1);
  std::uint8_t junk[16] = {1, 2, 3};
  EXPECT_EQ(image_size(junk), 0u);
}

}  // namespace
}  // namespace runsnack::cuda::wire
