#include "memory/resource.hpp"

#include <fmt/format.h>

namespace redwood::memory {

std::string format_bytes(std::size_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1024.0 && unit < 4) {
    v /= 1024.0;
    ++unit;
  }
  if (unit == 0) return fmt::format("{} B", bytes);
  if (v == static_cast<double>(static_cast<std::uint64_t>(v))) return fmt::format("{} {}", static_cast<std::uint64_t>(v), kUnits[unit]);
  return fmt::format("{:.1f} {}", v, kUnits[unit]);
}

double PoolStats::internal_waste() const {
  if (bytes_in_use == 0) return 0.0;
  return 1.0 - static_cast<double>(requested_bytes) / static_cast<double>(bytes_in_use);
}

double PoolStats::external_fragmentation() const {
  if (free_bytes == 0) return 0.0;
  return 1.0 - static_cast<double>(largest_free_block) / static_cast<double>(free_bytes);
}

MemoryResource::MemoryResource(std::string name) : name_(std::move(name)) {}

void MemoryResource::set_debug_checks(bool on) {
  std::lock_guard lock(live_mutex_);
  debug_checks_ = on;
  if (!on) live_.clear();
}

void MemoryResource::track_allocate(void* p, std::size_t bytes, std::size_t alignment) {
  std::lock_guard lock(live_mutex_);
  live_[p] = {bytes, alignment};
}

void MemoryResource::track_deallocate(void* p, std::size_t bytes, std::size_t alignment) {
  std::lock_guard lock(live_mutex_);
  auto it = live_.find(p);
  RW_EXPECTS(it != live_.end(), InvalidArgument,
             "{} '{}': deallocate({}, {}) of a pointer that is not live here (double free, or "
             "memory from another resource)",
             kind(), name_, p, bytes);
  RW_EXPECTS(it->second.bytes == bytes, InvalidArgument,
             "{} '{}': deallocate({}, {}) but it was allocated with {} bytes", kind(), name_, p,
             bytes, it->second.bytes);
  RW_EXPECTS(it->second.alignment == alignment, InvalidArgument,
             "{} '{}': deallocate({}, {}) with alignment {} but it was allocated with alignment {}",
             kind(), name_, p, bytes, alignment, it->second.alignment);
  live_.erase(it);
}

}  // namespace redwood::memory
