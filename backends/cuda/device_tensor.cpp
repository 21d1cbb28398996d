#include "backends/cuda/device_tensor.hpp"

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/device_memory.hpp"

#include <cstring>
#include <utility>

namespace redwood::cuda {

memory::MemoryResource& default_device_resource() {
  int device = 0;
  RW_CUDA_CHECK(cudaGetDevice(&device));
  return device_pool(device);
}

DeviceBuffer::DeviceBuffer(memory::MemoryResource& resource, std::size_t bytes, cudaStream_t stream)
    : resource_(&resource), bytes_(bytes), stream_(stream) {
  data_ = resource.allocate(bytes, memory::kDefaultAlignment, stream);
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : resource_(std::exchange(other.resource_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      stream_(other.stream_) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    resource_ = std::exchange(other.resource_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    stream_ = other.stream_;
  }
  return *this;
}

void DeviceBuffer::release() noexcept {
  if (resource_ != nullptr && data_ != nullptr) {
    try {
      resource_->deallocate(data_, bytes_, stream_);
    } catch (const std::exception&) {
      // Destructors never throw; the resource has already logged or counted the failure.
    }
  }
  data_ = nullptr;
}

PinnedStaging::~PinnedStaging() {
  if (data_ == nullptr) return;
  // A thread_local staging area may outlive the runtime at process exit; nothing to free then.
  const cudaError_t err = cudaFreeHost(data_);
  if (err != cudaSuccess && err != cudaErrorCudartUnloading) warn_cuda_error(err, "cudaFreeHost(data_)", __FILE__, __LINE__);
}

void* PinnedStaging::reserve(std::size_t bytes) {
  if (bytes <= capacity_) return data_;
  if (data_ != nullptr) RW_CUDA_CHECK(cudaFreeHost(data_));
  data_ = nullptr;
  capacity_ = 0;
  const std::size_t rounded = (bytes + (1u << 20) - 1) & ~std::size_t((1u << 20) - 1);
  RW_CUDA_CHECK(cudaHostAlloc(&data_, rounded, cudaHostAllocDefault));
  capacity_ = rounded;
  return data_;
}

Tensor device_empty(DType dtype, Shape shape) {
  const std::size_t bytes = static_cast<std::size_t>(shape_numel(shape)) * dtype_size(dtype);
  memory::MemoryResource& pool = default_device_resource();
  void* p = bytes > 0 ? pool.allocate(bytes) : nullptr;
  return Tensor::adopt(p, bytes, Device::kCuda, dtype, std::move(shape), [&pool, bytes](void* data) {
    try {
      pool.deallocate(data, bytes);
    } catch (const std::exception&) {
      // Destructors never throw; the pool has counted the failure.
    }
  });
}

void copy_host_to_device(void* device_dst, const void* host_src, std::size_t bytes, PinnedStaging& staging,
                         cudaStream_t stream) {
  if (bytes == 0) return;
  void* pinned = staging.reserve(bytes);
  std::memcpy(pinned, host_src, bytes);
  RW_CUDA_CHECK(cudaMemcpyAsync(device_dst, pinned, bytes, cudaMemcpyHostToDevice, stream));
  RW_CUDA_CHECK(cudaStreamSynchronize(stream));
}

Tensor to_device(const Tensor& host, cudaStream_t stream) {
  RW_EXPECTS(host.device() == Device::kCpu, InvalidArgument, "to_device: {} is already on the GPU",
             host.description());
  const Tensor src = host.contiguous();
  Tensor dst = device_empty(src.dtype(), src.shape());
  thread_local PinnedStaging staging;
  copy_host_to_device(dst.raw_data(), src.raw_data(), src.nbytes(), staging, stream);
  return dst;
}

Tensor to_host(const Tensor& device, cudaStream_t stream) {
  RW_EXPECTS(device.device() == Device::kCuda, InvalidArgument, "to_host: {} is not on the GPU",
             device.description());
  RW_EXPECTS(device.is_contiguous(), InvalidArgument, "to_host: {} is not contiguous", device.description());
  Tensor dst = Tensor::empty(device.dtype(), device.shape());
  if (dst.nbytes() == 0) return dst;
  thread_local PinnedStaging staging;
  void* pinned = staging.reserve(dst.nbytes());
  RW_CUDA_CHECK(cudaMemcpyAsync(pinned, device.raw_data(), dst.nbytes(), cudaMemcpyDeviceToHost, stream));
  RW_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::memcpy(dst.raw_data(), pinned, dst.nbytes());
  return dst;
}

}  // namespace redwood::cuda
