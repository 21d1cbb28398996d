#pragma once
// Device memory and device tensors.
//
// DeviceBuffer: one allocation from a memory::MemoryResource (by default the process's
// memory::cuda::DeviceResource, whose statistics the metrics read), given back on destruction,
// stream-ordered when it was taken on a stream. The graph runner keeps its weights and its
// liveness-planned workspaces in DeviceBuffers over arenas (device_memory.hpp).
//
// Device tensors are core Tensors with Device::kCuda: device_empty() owns a block of the device pool;
// to_device()/to_host() copy through page-locked staging so the DMA engine does the transfer.

#include "core/tensor.hpp"
#include "memory/resource.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>

namespace redwood::cuda {

/// Transient device memory on the current GPU: its stream-ordered buddy pool (device_memory.hpp).
memory::MemoryResource& default_device_resource();

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(memory::MemoryResource& resource, std::size_t bytes, cudaStream_t stream = nullptr);
  explicit DeviceBuffer(std::size_t bytes) : DeviceBuffer(default_device_resource(), bytes) {}
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void release() noexcept;
  memory::MemoryResource* resource_ = nullptr;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  cudaStream_t stream_ = nullptr;
};

/// Page-locked host memory that grows on demand (never shrinks): the staging area of host↔device
/// copies. Not thread-safe; one per user.
class PinnedStaging {
 public:
  PinnedStaging() = default;
  ~PinnedStaging();
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;
  /// At least `bytes` of pinned memory (previous contents are lost when it grows).
  void* reserve(std::size_t bytes);
  std::size_t capacity() const { return capacity_; }

 private:
  void* data_ = nullptr;
  std::size_t capacity_ = 0;
};

/// An owning, contiguous device tensor (uninitialized).
Tensor device_empty(DType dtype, Shape shape);
/// Copies a host tensor (any strides) to a new device tensor; returns when the copy is done.
Tensor to_device(const Tensor& host, cudaStream_t stream = nullptr);
/// Copies a contiguous device tensor to a new host tensor; returns when the copy is done.
Tensor to_host(const Tensor& device, cudaStream_t stream = nullptr);
/// Copies `bytes` from host memory to device memory through `staging` on `stream` and waits.
void copy_host_to_device(void* device_dst, const void* host_src, std::size_t bytes, PinnedStaging& staging,
                         cudaStream_t stream);

}  // namespace redwood::cuda
