#pragma once
// Control messages: the auth exchange after TLS and the header that opens
// every stream. Small JSON objects with a length prefix; bulk bytes on a
// stream follow the header raw.
//
//   0               1               2               3
//  +---------------+---------------+---------------+---------------+
//  |         body length, u32 big-endian, 2 <= n <= kMaxMessageBytes |
//  +---------------+---------------+---------------+---------------+
//  |         body: one JSON object, UTF-8, n bytes                  |
//  +---------------------------------------------------------------+
//
// Decoding is strict and bounded: a length over the limit, a body that is not
// a JSON object, or JSON nested deeper than a few levels is `errc::malformed`
// or `errc::too_large`, never an exception.

#include "core/error.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <span>
#include <string>

namespace runsnack {

// Large enough for an info reply listing many GPUs; small enough that an
// unauthenticated peer cannot make us allocate much.
inline constexpr std::uint32_t kMaxMessageBytes = 64 * 1024;
inline constexpr std::size_t kMessagePrefixBytes = 4;

std::string encode_message(const nlohmann::json& body);

// Reads the prefix; checks 2 <= length <= max_bytes.
Result<std::uint32_t> decode_message_length(std::span<const std::uint8_t, kMessagePrefixBytes> prefix,
                                            std::uint32_t max_bytes = kMaxMessageBytes);
Result<nlohmann::json> decode_message_body(std::span<const std::uint8_t> body,
                                           std::uint32_t max_bytes = kMaxMessageBytes);

// Typed accessors for message fields: a missing or mistyped field is `errc::malformed`
// naming the field; strings longer than max_len are refused.
Result<std::string> get_string(const nlohmann::json& obj, const char* key, std::size_t max_len = 256);
Result<std::int64_t> get_int(const nlohmann::json& obj, const char* key);
Result<bool> get_bool(const nlohmann::json& obj, const char* key);

}  // namespace runsnack
