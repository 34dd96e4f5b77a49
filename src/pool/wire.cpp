#include "pool/wire.hpp"

#include <openssl/evp.h>

namespace runsnack::pool {

std::string base64_encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

Result<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return fail(errc::malformed, "bad base64 length");
  std::string out(3 * text.size() / 4 + 1, '\0');
  int n = text.empty() ? 0
                       : EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                         reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0) return fail(errc::malformed, "bad base64");
  std::size_t len = static_cast<std::size_t>(n);
  if (!text.empty() && text.back() == '=') --len;
  if (text.size() >= 2 && text[text.size() - 2] == '=') --len;
  out.resize(len);
  return out;
}

std::string hex_encode(std::string_view bytes) {
  static const char* d = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) out += d[b >> 4], out += d[b & 15];
  return out;
}

Result<std::string> hex_decode(std::string_view text) {
  if (text.size() % 2) return fail(errc::malformed, "bad hex length");
  auto val = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string out;
  for (std::size_t i = 0; i < text.size(); i += 2) {
    int hi = val(text[i]), lo = val(text[i + 1]);
    if (hi < 0 || lo < 0) return fail(errc::malformed, "bad hex");
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

}  // namespace runsnack::pool
