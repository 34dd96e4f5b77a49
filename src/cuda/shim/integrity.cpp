#include "cuda/shim/integrity.hpp"

#include <cstring>

namespace runsnack::cuda::shim {
namespace {

// RFC 1319's substitution table (a permutation of 0..255 from the digits of pi).
constexpr std::uint8_t kS[256] = {
    41,  46,  67,  201, 162, 216, 124, 1,   61,  54,  84,  161, 236, 240, 6,   19,  98,  167, 5,   243, 192, 199,
    115, 140, 152, 147, 43,  217, 188, 76,  130, 202, 30,  155, 87,  60,  253, 212, 224, 22,  103, 66,  111, 24,
    138, 23,  229, 18,  190, 78,  196, 214, 218, 158, 222, 73,  160, 251, 245, 142, 187, 47,  238, 122, 169, 104,
    121, 145, 21,  178, 7,   63,  148, 194, 16,  137, 11,  34,  95,  33,  128, 127, 93,  154, 90,  144, 50,  39,
    53,  62,  204, 231, 191, 247, 151, 3,   255, 25,  48,  179, 72,  165, 181, 209, 215, 94,  146, 42,  172, 86,
    170, 198, 79,  184, 56,  210, 150, 164, 125, 182, 118, 252, 107, 226, 156, 116, 4,   241, 69,  157, 112, 89,
    100, 113, 135, 32,  134, 91,  207, 101, 230, 45,  168, 2,   27,  96,  37,  173, 174, 176, 185, 246, 28,  70,
    97,  105, 52,  64,  126, 15,  85,  71,  163, 35,  221, 81,  175, 58,  195, 92,  249, 206, 186, 197, 234, 38,
    44,  83,  13,  110, 133, 40,  132, 9,   211, 223, 205, 244, 65,  129, 77,  82,  106, 220, 55,  200, 108, 193,
    171, 250, 36,  225, 123, 8,   12,  189, 177, 74,  120, 136, 149, 139, 227, 99,  232, 109, 233, 203, 213, 254,
    59,  0,   29,  57,  242, 239, 183, 14,  102, 88,  208, 228, 166, 119, 114, 248, 235, 117, 75,  10,  49,  68,
    80,  180, 143, 237, 31,  26,  219, 153, 141, 51,  159, 17,  131, 20};

struct Md2 {
  std::uint8_t x[48]{};
  std::uint8_t checksum[16]{};
  std::uint8_t block[16]{};
  std::size_t used = 0;

  void compress(const std::uint8_t* b) {
    for (int i = 0; i < 16; ++i) {
      x[16 + i] = b[i];
      x[32 + i] = static_cast<std::uint8_t>(x[16 + i] ^ x[i]);
    }
    std::uint8_t t = 0;
    for (int round = 0; round < 18; ++round) {
      for (auto& v : x) t = v ^= kS[t];
      t = static_cast<std::uint8_t>(t + round);
    }
    std::uint8_t l = checksum[15];
    for (int i = 0; i < 16; ++i) l = checksum[i] ^= kS[b[i] ^ l];
  }
  void update(const std::uint8_t* p, std::size_t n) {
    while (n > 0) {
      std::size_t take = std::min<std::size_t>(16 - used, n);
      std::memcpy(block + used, p, take);
      used += take, p += take, n -= take;
      if (used == 16) compress(block), used = 0;
    }
  }
  void finish(std::uint8_t out[16]) {
    std::uint8_t pad[16];
    std::memset(pad, static_cast<int>(16 - used), sizeof pad);
    update(pad, 16 - used);
    std::uint8_t c[16];
    std::memcpy(c, checksum, 16);
    compress(c);
    std::memcpy(out, x, 16);
  }
};

// The HMAC key cudart and the driver share.
constexpr std::uint8_t kKey[16] = {0x14, 0x6A, 0xDD, 0xAE, 0x53, 0xA9, 0xA7, 0x52,
                                   0xAA, 0x08, 0x41, 0x36, 0x0B, 0xF5, 0x5A, 0x9F};

template <class T>
void put(std::vector<std::uint8_t>& m, const T& v) {
  auto* b = reinterpret_cast<const std::uint8_t*>(&v);
  m.insert(m.end(), b, b + sizeof v);
}

}  // namespace

void md2(const std::uint8_t* data, std::size_t n, std::uint8_t out[16]) {
  Md2 h;
  h.update(data, n);
  h.finish(out);
}

void integrity_digest(const IntegrityInput& in, std::uint64_t out[2]) {
  // The first two versions of the check are answered with fixed values.
  if (in.version % 10 == 0) {
    out[0] = 0x3341181C03CB675Cull, out[1] = 0x8ED383AA1F4CD1E8ull;
    return;
  }
  if (in.version % 10 == 1) {
    out[0] = 0x1841181C03CB675Cull, out[1] = 0x8ED383AA1F4CD1E8ull;
    return;
  }
  std::vector<std::uint8_t> msg;
  put(msg, in.driver_version);
  put(msg, in.version);
  put(msg, in.process);
  put(msg, in.thread);
  put(msg, in.cudart_table);
  put(msg, in.integrity_table);
  put(msg, in.function);
  put(msg, in.unix_seconds);
  for (const auto& d : in.devices) {
    msg.insert(msg.end(), d.uuid, d.uuid + 16);
    put(msg, d.pci_domain);
    put(msg, d.pci_bus);
    put(msg, d.pci_device);
  }
  std::uint8_t pad[16], inner[16], digest[16];
  Md2 h;
  for (int i = 0; i < 16; ++i) pad[i] = kKey[i] ^ 0x36;
  h.update(pad, 16);
  h.update(msg.data(), msg.size());
  h.finish(inner);
  Md2 o;
  for (int i = 0; i < 16; ++i) pad[i] = kKey[i] ^ 0x5c;
  o.update(pad, 16);
  o.update(inner, 16);
  o.finish(digest);
  std::memcpy(out, digest, 16);
}

}  // namespace runsnack::cuda::shim
