#include "memory/host_resource.hpp"

#include <cstdlib>

namespace redwood::memory {

HostResource::HostResource(std::string name, std::size_t limit)
    : MemoryResource(std::move(name)), limit_(limit) {}

void* HostResource::do_allocate(std::size_t bytes, std::size_t alignment, Stream) {
  if (!counters_.try_reserve(bytes, limit_)) {
    throw OutOfMemory(fmt::format("{} '{}' is out of memory: {} requested, limit {}, {} in use",
                                  kind(), name(), format_bytes(bytes), format_bytes(limit_),
                                  format_bytes(counters_.in_use())));
  }
  void* p = nullptr;
  const std::size_t align = alignment < sizeof(void*) ? sizeof(void*) : alignment;
  if (posix_memalign(&p, align, bytes) != 0) {
    counters_.unreserve(bytes);
    throw OutOfMemory(fmt::format("{} '{}' is out of memory: posix_memalign of {} (alignment {}) failed, {} in use",
                                  kind(), name(), format_bytes(bytes), align,
                                  format_bytes(counters_.in_use())));
  }
  return p;
}

void HostResource::do_deallocate(void* p, std::size_t bytes, std::size_t, Stream) {
  std::free(p);
  counters_.release(bytes);
}

}  // namespace redwood::memory
