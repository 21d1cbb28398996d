#include "backends/cuda/device_memory.hpp"

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/device.hpp"

#include <fmt/format.h>

#include <array>
#include <mutex>

namespace redwood::cuda {
namespace {

constexpr int kMaxDevices = 16;
// The pools' block size: a workspace-sized transient buffer fits one; larger ones go upstream.
constexpr std::size_t kDeviceChunk = 256ull << 20;
constexpr std::size_t kPinnedChunk = 64ull << 20;

void check_device(int device) {
  RW_EXPECTS(device >= 0 && device < kMaxDevices, InvalidArgument, "GPU index {} is out of range (0 to {})", device,
             kMaxDevices - 1);
}

// Small requests from a buddy pool, large ones straight from its upstream (the pool's largest
// block is its chunk). The size given back on deallocate picks the same side.
class SplitResource final : public memory::MemoryResource {
 public:
  SplitResource(std::string name, memory::MemoryResource& upstream, memory::BuddyConfig config)
      : MemoryResource(name), upstream_(upstream), pool_(std::move(name), upstream, config), largest_(config.max_block_bytes) {}
  std::string_view kind() const override { return "buddy pool"; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, memory::Stream stream) override {
    return bytes <= largest_ ? pool_.allocate(bytes, alignment, stream) : upstream_.allocate(bytes, alignment, stream);
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment, memory::Stream stream) override {
    if (bytes <= largest_) {
      pool_.deallocate(p, bytes, alignment, stream);
    } else {
      if (stream != nullptr) RW_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
      upstream_.deallocate(p, bytes, alignment, nullptr);
    }
  }
  memory::PoolStats do_stats() const override { return pool_.stats(); }

  memory::MemoryResource& upstream_;
  memory::BuddyResource pool_;
  std::size_t largest_;
};

std::size_t device_bytes(int device) { return cuda_device(device).total_memory; }

}  // namespace

memory::cuda::DeviceResource& device_upstream(int device) {
  check_device(device);
  static std::array<memory::cuda::DeviceResource*, kMaxDevices> resources{};
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  if (resources[device] == nullptr) {
    resources[device] = new memory::cuda::DeviceResource(fmt::format("cuda:{}", device), device);  // never freed
  }
  return *resources[device];
}

memory::MemoryResource& device_pool(int device) {
  check_device(device);
  static std::array<memory::MemoryResource*, kMaxDevices> pools{};
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  if (pools[device] == nullptr) {
    memory::BuddyConfig config;
    config.max_block_bytes = kDeviceChunk;
    // The limit sizes the pool's metadata reservation; the device's memory is the most it can use.
    config.limit_bytes = (device_bytes(device) / kDeviceChunk + 1) * kDeviceChunk;
    config.ordering = std::make_shared<memory::cuda::CudaStreamOrdering>();
    pools[device] = new SplitResource(fmt::format("cuda:{} transient", device), device_upstream(device), config);
  }
  return *pools[device];
}

memory::cuda::PinnedHostResource& pinned_upstream() {
  static auto* resource = new memory::cuda::PinnedHostResource("pinned host");
  return *resource;
}

memory::MemoryResource& pinned_pool() {
  static memory::MemoryResource* pool = [] {
    memory::BuddyConfig config;
    config.max_block_bytes = kPinnedChunk;
    config.limit_bytes = 64ull << 30;
    config.shards = 1;
    config.cache_blocks_per_order = 0;  // few, large buffers (the slots' staging)
    return new SplitResource("pinned staging", pinned_upstream(), config);
  }();
  return *pool;
}

std::unique_ptr<memory::ArenaResource> device_arena(std::string name, int device, std::size_t bytes) {
  return std::make_unique<memory::ArenaResource>(std::move(name), device_upstream(device), std::max<std::size_t>(bytes, 256),
                                                 memory::kDefaultAlignment);
}

}  // namespace redwood::cuda
