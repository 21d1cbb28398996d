#pragma once
// HostResource: aligned host memory straight from the C library (posix_memalign). The upstream
// of host pools; in steady state nothing else should call it.

#include "memory/detail/upstream_counters.hpp"
#include "memory/resource.hpp"

namespace redwood::memory {

class HostResource final : public MemoryResource {
 public:
  /// `limit` caps the bytes live at once (0: no cap beyond the system's).
  explicit HostResource(std::string name = "host", std::size_t limit = 0);
  std::string_view kind() const override { return "host resource"; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, Stream stream) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment, Stream stream) override;
  PoolStats do_stats() const override { return counters_.stats(name(), limit_); }

  std::size_t limit_;
  detail::UpstreamCounters counters_;
};

}  // namespace redwood::memory
