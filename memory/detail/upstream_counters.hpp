#pragma once
// Counters for pass-through resources (host, pinned, device), where every call is an upstream
// call. Atomic: these resources are called from any thread and are slow anyway.

#include "memory/resource.hpp"

#include <atomic>

namespace redwood::memory::detail {

class UpstreamCounters {
 public:
  /// Reserves `bytes` against `limit` (0: unlimited); false when it would exceed it.
  bool try_reserve(std::size_t bytes, std::size_t limit) {
    std::size_t cur = in_use_.load(std::memory_order_relaxed);
    do {
      if (limit != 0 && cur + bytes > limit) return false;
    } while (!in_use_.compare_exchange_weak(cur, cur + bytes, std::memory_order_relaxed));
    std::size_t hw = high_water_.load(std::memory_order_relaxed);
    while (cur + bytes > hw &&
           !high_water_.compare_exchange_weak(hw, cur + bytes, std::memory_order_relaxed)) {
    }
    allocations_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  void unreserve(std::size_t bytes) { in_use_.fetch_sub(bytes, std::memory_order_relaxed); }
  void release(std::size_t bytes) {
    in_use_.fetch_sub(bytes, std::memory_order_relaxed);
    deallocations_.fetch_add(1, std::memory_order_relaxed);
  }
  std::size_t in_use() const { return in_use_.load(std::memory_order_relaxed); }

  PoolStats stats(std::string name, std::size_t limit) const {
    PoolStats s;
    s.name = std::move(name);
    s.bytes_in_use = s.requested_bytes = s.reserved_bytes = in_use();
    s.high_water_bytes = high_water_.load(std::memory_order_relaxed);
    s.limit_bytes = limit;
    s.allocations = s.upstream_allocations = allocations_.load(std::memory_order_relaxed);
    s.deallocations = s.upstream_deallocations = deallocations_.load(std::memory_order_relaxed);
    return s;
  }

 private:
  std::atomic<std::size_t> in_use_{0}, high_water_{0};
  std::atomic<std::uint64_t> allocations_{0}, deallocations_{0};
};

}  // namespace redwood::memory::detail
