#pragma once
// Unit-test helpers for a PoolStore: a device as the coordinator leaves it
// after registration and calibration (its measured score set).

#include "pool/pool_store.hpp"

#include <string>

namespace runsnack::pool {

inline Result<std::string> registered(PoolStore& store, const std::string& peer, const std::string& kind,
                                      const std::string& name, double score, double price, std::int64_t now) {
  auto id = store.register_device(peer, kind, name, price, now);
  if (!id) return id;
  if (auto r = store.set_device_score(*id, score); !r) return r.error();
  return id;
}

}  // namespace runsnack::pool
