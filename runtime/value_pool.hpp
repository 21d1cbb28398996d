#pragma once
// Host tensors recycled by size: a batch's tensors come back for the next batch as a pipeline's
// frame pool does, so they are neither page-faulted in afresh each batch nor, over an
// accelerator's page-locked memory, allocated and registered each time. A request takes the
// smallest free block that holds it and is at most twice its size: batches of a few rows fewer
// reuse a fuller batch's blocks (a pipeline's batches vary in rows, and a split's values with
// them), while a block much larger than a request stays free for the requests it fits.
// The split runner keeps the values that cross between segments in one
// (runtime/split_runner.hpp), and measure_partition gives one to the batches it times (their
// outputs, as a pipeline's frame pool takes them). Its upstream is an accelerator's pinned memory
// (copies to and from it run at full speed), else the heap.
// Thread-safe; outlives its tensors (each holds it).

#include "core/model_runner.hpp"
#include "core/tensor.hpp"
#include "memory/resource.hpp"

#include <algorithm>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

namespace redwood::runtime {

class ValuePool : public std::enable_shared_from_this<ValuePool> {
 public:
  /// `upstream` may be null: the heap.
  explicit ValuePool(memory::MemoryResource* upstream) : upstream_(upstream) {}
  ~ValuePool() {
    for (const auto& [bytes, p] : free_) give_back(p, bytes);
  }

  Tensor make(DType dtype, const Shape& shape) {
    for (auto d : shape) {
      if (d < 0) return Tensor::empty(dtype, shape);  // which reports the bad shape
    }
    const std::size_t bytes = static_cast<std::size_t>(shape_numel(shape)) * dtype_size(dtype);
    std::size_t block = std::max<std::size_t>(bytes, 64);
    void* p = nullptr;
    {
      std::lock_guard lock(mutex_);
      if (auto it = free_.lower_bound(block); it != free_.end() && it->first / 2 <= block) {
        block = it->first;
        p = it->second;
        free_.erase(it);
        ++counts_.reused;
      }
    }
    if (p == nullptr) {
      // Counted once it is made: an allocation that throws takes nothing from upstream.
      p = upstream_ != nullptr ? upstream_->allocate(block, kAlignment) : ::operator new(block, std::align_val_t{kAlignment});
      std::lock_guard lock(mutex_);
      ++counts_.fresh;
    }
    return Tensor::adopt(p, bytes, Device::kCpu, dtype, shape, [pool = shared_from_this(), block](void* data) {
      std::lock_guard lock(pool->mutex_);
      pool->free_.emplace(block, data);
    });
  }

  /// Tensors made from blocks taken fresh from upstream, and from blocks reused.
  struct Counts {
    std::size_t fresh = 0, reused = 0;
  };
  Counts counts() const {
    std::lock_guard lock(mutex_);
    return counts_;
  }

  /// make() as a batch's allocator (InferBatch::allocate); it holds the pool.
  TensorAllocator allocator() {
    return [pool = shared_from_this()](DType dtype, const Shape& shape) { return pool->make(dtype, shape); };
  }

 private:
  static constexpr std::size_t kAlignment = 256;
  void give_back(void* p, std::size_t bytes) {
    if (upstream_ != nullptr) upstream_->deallocate(p, bytes, kAlignment, nullptr);
    else ::operator delete(p, std::align_val_t{kAlignment});
  }
  memory::MemoryResource* upstream_;
  mutable std::mutex mutex_;
  std::multimap<std::size_t, void*> free_;  // block bytes -> block
  Counts counts_;
};

/// The page-locked host memory of the first of `devices` whose runner has one (a GPU's), else null.
inline memory::MemoryResource* accelerator_pinned_memory(const std::vector<std::string>& devices) {
  for (const auto& device : devices) {
    const auto it = device_runner_registry().find(device);
    if (it != device_runner_registry().end() && it->second.pinned_memory) return &it->second.pinned_memory();
  }
  return nullptr;
}

}  // namespace redwood::runtime
