#include "stages/frame_memory.hpp"

#include "core/recycling_allocator.hpp"
#include "memory/host_resource.hpp"
#include "memory/tiered.hpp"
#include "memory/tracing_resource.hpp"
#include "stages/picture_cv.hpp"

#include <opencv2/core.hpp>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

namespace redwood {

namespace {
// Pictures and tensors are read with SIMD loads; a cache line is plenty (the pool's blocks are
// aligned to at least min_block_bytes anyway).
constexpr std::size_t kAlignment = 64;
// OpenCV's CV_AUTOSTEP (core/types_c.h, the C API this file does not include).
constexpr std::size_t kAutoStep = 0x7fffffff;
}  // namespace

class PoolMatAllocator;

struct FrameMemory::State : std::enable_shared_from_this<FrameMemory::State> {
  explicit State(const FrameMemoryConfig& c)
      : own_upstream(c.upstream ? nullptr : std::make_unique<memory::HostResource>("frames upstream")),
        upstream(c.upstream ? *c.upstream : *own_upstream),
        pool("frames", upstream, memory::frame_pool_tiers(c.chunk_bytes), memory::frame_pool_base(c.chunk_bytes, c.limit_bytes)) {}
  std::unique_ptr<memory::HostResource> own_upstream;
  memory::MemoryResource& upstream;
  memory::TieredResource pool;  // small and middle-sized buffers in tiers of their own (memory/tiered.hpp)
  // REDWOOD_MEMORY_TRACE=FILE records every call on the pool (memory/tracing_resource.hpp), the
  // trace redwood_memory_bench's BM_PipelineTrace replays. calls() is what buffers come from.
  std::unique_ptr<memory::TracingResource> tracer = [this]() -> std::unique_ptr<memory::TracingResource> {
    const char* file = std::getenv("REDWOOD_MEMORY_TRACE");
    return file && *file ? std::make_unique<memory::TracingResource>(pool, file) : nullptr;
  }();
  memory::MemoryResource& calls() { return tracer ? static_cast<memory::MemoryResource&>(*tracer) : pool; }
  std::unique_ptr<PoolMatAllocator> mats;
  std::atomic<std::uint64_t> fallbacks{0};
};

namespace {

// Each Mat buffer's bookkeeping keeps the pool alive, so that a picture may outlive the pipeline.
struct PooledMatData : cv::UMatData {
  PooledMatData(const cv::MatAllocator* a, std::shared_ptr<FrameMemory::State> s) : cv::UMatData(a), state(std::move(s)) {}
  std::shared_ptr<FrameMemory::State> state;
};

}  // namespace

/// OpenCV's StdMatAllocator (modules/core/src/matrix.cpp), with the buffer from the pool.
class PoolMatAllocator final : public cv::MatAllocator {
 public:
  explicit PoolMatAllocator(FrameMemory::State& state) : state_(state) {}

  cv::UMatData* allocate(int dims, const int* sizes, int type, void* data0, size_t* step, cv::AccessFlag,
                         cv::UMatUsageFlags) const override {
    std::size_t total = CV_ELEM_SIZE(type);
    for (int i = dims - 1; i >= 0; --i) {
      if (step) {
        if (data0 && step[i] != kAutoStep) {
          CV_Assert(total <= step[i]);
          total = step[i];
        } else {
          step[i] = total;
        }
      }
      total *= static_cast<std::size_t>(sizes[i]);
    }
    void* data = data0;
    if (!data0) {
      try {
        data = state_.calls().allocate(std::max<std::size_t>(total, 1), kAlignment);
      } catch (const memory::OutOfMemory&) {
        ++state_.fallbacks;
        throw;  // Mat::create then takes the buffer from OpenCV's default allocator
      }
    }
    // The record is recycled (core/recycling_allocator.hpp): no heap allocation once warm.
    RecyclingAllocator<PooledMatData> records;
    auto* u = ::new (records.allocate(1)) PooledMatData(this, state_.shared_from_this());
    u->data = u->origdata = static_cast<uchar*>(data);
    u->size = total;
    if (data0) u->flags |= cv::UMatData::USER_ALLOCATED;
    return u;
  }

  bool allocate(cv::UMatData* u, cv::AccessFlag, cv::UMatUsageFlags) const override { return u != nullptr; }

  void deallocate(cv::UMatData* u) const override {
    if (!u) return;
    CV_Assert(u->urefcount == 0 && u->refcount == 0);
    auto* pooled = static_cast<PooledMatData*>(u);
    // The last picture may hold the last reference to the pool (and so to this allocator):
    // release it only after everything here is done.
    std::shared_ptr<FrameMemory::State> keep = std::move(pooled->state);
    if (!(u->flags & cv::UMatData::USER_ALLOCATED)) keep->calls().deallocate(u->origdata, std::max<std::size_t>(u->size, 1), kAlignment, nullptr);
    pooled->~PooledMatData();
    RecyclingAllocator<PooledMatData>().deallocate(pooled, 1);
  }

 private:
  FrameMemory::State& state_;
};


FrameMemory::FrameMemory(FrameMemoryConfig config) : state_(std::make_shared<State>(config)) {
  state_->mats = std::make_unique<PoolMatAllocator>(*state_);
  if (config.reserve_bytes > 0) reserve(config.reserve_bytes);
}

FrameMemory::~FrameMemory() = default;

Tensor FrameMemory::empty(DType dtype, Shape shape) {
  for (auto d : shape) {
    if (d < 0) return Tensor::empty(dtype, std::move(shape));  // which reports the bad shape
  }
  const std::size_t bytes = static_cast<std::size_t>(shape_numel(shape)) * dtype_size(dtype);
  const std::size_t block = std::max<std::size_t>(bytes, 1);
  void* p = nullptr;
  try {
    p = state_->calls().allocate(block, kAlignment);
  } catch (const memory::OutOfMemory&) {
    ++state_->fallbacks;
    return Tensor::empty(dtype, std::move(shape));
  }
  return Tensor::adopt(p, bytes, Device::kCpu, dtype, std::move(shape), [state = state_, block](void* data) {
    state->calls().deallocate(data, block, kAlignment, nullptr);
  });
}

Picture FrameMemory::picture(int width, int height, int channels) {
  Picture p;
  p.width = width;
  p.height = height;
  p.channels = channels;
  p.stride = p.row_bytes();
  if (width < 0 || height < 0 || channels < 1 ||
      (height > 0 && p.stride > std::numeric_limits<std::size_t>::max() / static_cast<std::size_t>(height))) {
    return Picture::allocate(width, height, channels);  // which reports the bad extents
  }
  const std::size_t block = std::max<std::size_t>(p.stride * static_cast<std::size_t>(height), 1);
  try {
    p.data = static_cast<std::uint8_t*>(state_->calls().allocate(block, kAlignment));
  } catch (const memory::OutOfMemory&) {
    ++state_->fallbacks;
    return Picture::allocate(width, height, channels);
  }
  // The release travels in the shared pointer's control block, recycled: no heap allocation
  // once warm.
  p.owner = std::shared_ptr<void>(
      p.data, [state = state_, block](void* data) { state->calls().deallocate(data, block, kAlignment, nullptr); },
      RecyclingAllocator<char>());
  return p;
}

Tensor FrameMemory::zeros(DType dtype, Shape shape) {
  Tensor t = empty(dtype, std::move(shape));
  std::memset(t.raw_data(), 0, t.nbytes());
  return t;
}

std::size_t FrameMemory::reserve(std::size_t bytes) {
  // Whole chunks taken and handed back: the base pool keeps the chunks it took (trim() aside).
  const std::size_t chunk = state_->pool.pools().back()->config().max_block_bytes;
  std::vector<void*> taken;
  std::size_t reserved = state_->pool.stats().reserved_bytes;
  while (reserved < bytes) {
    try {
      taken.push_back(state_->pool.allocate(chunk, kAlignment));
    } catch (const memory::OutOfMemory&) {
      break;  // the pool's limit
    }
    reserved = state_->pool.stats().reserved_bytes;
  }
  for (void* p : taken) state_->pool.deallocate(p, chunk, kAlignment, nullptr);
  return reserved;
}

cv::MatAllocator* FrameMemory::mat_allocator() { return state_->mats.get(); }

FrameMemoryStats FrameMemory::stats() const {
  return {state_->pool.stats(), state_->upstream.stats(), state_->fallbacks.load()};
}

Tensor frame_tensor(FrameMemory* memory, DType dtype, Shape shape) {
  return memory ? memory->empty(dtype, std::move(shape)) : Tensor::empty(dtype, std::move(shape));
}

Tensor frame_tensor_zeros(FrameMemory* memory, DType dtype, Shape shape) {
  return memory ? memory->zeros(dtype, std::move(shape)) : Tensor::zeros(dtype, std::move(shape));
}

Picture frame_picture(FrameMemory* memory, int width, int height, int channels) {
  return memory ? memory->picture(width, height, channels) : Picture::allocate(width, height, channels);
}

cv::Mat frame_mat(FrameMemory* memory) {
  cv::Mat m;
  if (memory) m.allocator = memory->mat_allocator();
  return m;
}

}  // namespace redwood
