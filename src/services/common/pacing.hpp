#pragma once
// Waiting out a TokenBucket on an Asio executor, for the pumps that share a
// link's bandwidth limit (pump.hpp).

#include "services/common/token_bucket.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstddef>

namespace runsnack {

// Takes n bytes' worth of tokens and waits until they may be sent; no-op
// without a bucket.
boost::asio::awaitable<void> pace(TokenBucket* bucket, std::size_t n);

}  // namespace runsnack
