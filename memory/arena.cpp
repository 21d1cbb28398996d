#include "memory/arena.hpp"

namespace redwood::memory {

ArenaResource::ArenaResource(std::string name, MemoryResource& upstream, std::size_t capacity,
                             std::size_t base_alignment)
    : MemoryResource(std::move(name)), upstream_(upstream), capacity_(capacity),
      base_alignment_(base_alignment) {
  RW_EXPECTS(capacity > 0, InvalidArgument, "arena '{}': capacity must be positive", this->name());
}

ArenaResource::~ArenaResource() { release(); }

void ArenaResource::reset() {
  std::lock_guard lock(mutex_);
  offset_ = requested_ = live_ = 0;
}

void ArenaResource::release() {
  std::lock_guard lock(mutex_);
  if (base_ != nullptr) {
    upstream_.deallocate(base_, capacity_, base_alignment_, nullptr);
    ++upstream_deallocations_;
    base_ = nullptr;
  }
  offset_ = requested_ = live_ = 0;
}

void* ArenaResource::do_allocate(std::size_t bytes, std::size_t alignment, Stream) {
  std::lock_guard lock(mutex_);
  RW_EXPECTS(alignment <= base_alignment_, InvalidArgument,
             "arena '{}': alignment {} exceeds the arena's base alignment {}", name(), alignment,
             base_alignment_);
  const std::size_t start = (offset_ + alignment - 1) & ~(alignment - 1);
  if (start > capacity_ || bytes > capacity_ - start) {
    throw OutOfMemory(fmt::format("arena '{}' is out of memory: {} requested, limit {}, {} in use",
                                  name(), format_bytes(bytes), format_bytes(capacity_),
                                  format_bytes(offset_)));
  }
  if (base_ == nullptr) {
    base_ = static_cast<std::byte*>(upstream_.allocate(capacity_, base_alignment_));
    ++upstream_allocations_;
  }
  offset_ = start + bytes;
  requested_ += bytes;
  ++live_;
  high_water_ = std::max(high_water_, offset_);
  ++allocations_;
  return base_ + start;
}

void ArenaResource::do_deallocate(void* p, std::size_t bytes, std::size_t, Stream) {
  std::lock_guard lock(mutex_);
  RW_EXPECTS(base_ != nullptr && p >= base_ && static_cast<std::byte*>(p) < base_ + offset_,
             InvalidArgument, "arena '{}': deallocate of {} which this arena did not hand out",
             name(), p);
  ++deallocations_;
  if (live_ > 0 && --live_ == 0) offset_ = requested_ = 0;  // all gone: start over
  else requested_ -= std::min(requested_, bytes);
}

PoolStats ArenaResource::do_stats() const {
  std::lock_guard lock(mutex_);
  PoolStats s;
  s.name = name();
  s.bytes_in_use = offset_;
  s.requested_bytes = requested_;
  s.high_water_bytes = high_water_;
  s.reserved_bytes = base_ ? capacity_ : 0;
  s.free_bytes = s.largest_free_block = capacity_ - offset_;
  s.limit_bytes = capacity_;
  s.allocations = allocations_;
  s.deallocations = deallocations_;
  s.upstream_allocations = upstream_allocations_;
  s.upstream_deallocations = upstream_deallocations_;
  return s;
}

}  // namespace redwood::memory
