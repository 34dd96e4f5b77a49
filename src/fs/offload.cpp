#include "fs/offload.hpp"

namespace runsnack::fs {

boost::asio::thread_pool& offload_pool() {
  // Joined at exit; a provider's io thread only returns once the jobs it waits for are done.
  static boost::asio::thread_pool pool(kOffloadThreads);
  return pool;
}

}  // namespace runsnack::fs
