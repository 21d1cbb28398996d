#include "memory/cuda/cuda_resources.hpp"

#include <cuda_runtime_api.h>

namespace redwood::memory::cuda {
namespace {

void check(cudaError_t e, const char* call) {
  if (e != cudaSuccess) {
    cudaGetLastError();  // reported here, not left for a later launch check to find
    throw Error(fmt::format("{} failed: {} ({})", call, cudaGetErrorName(e), cudaGetErrorString(e)));
  }
}
#define RW_CUDA_TRY(call) check((call), #call)

[[noreturn]] void out_of_memory(std::string_view kind, const std::string& name, std::size_t bytes,
                                std::size_t limit, std::size_t in_use, std::string_view why = {}) {
  throw OutOfMemory(fmt::format("{} '{}' is out of memory: {} requested, limit {}, {} in use{}{}",
                                kind, name, format_bytes(bytes),
                                limit ? format_bytes(limit) : std::string("none"),
                                format_bytes(in_use), why.empty() ? "" : ": ", why));
}

}  // namespace

int device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = fmt::format("cudaGetDeviceCount failed: {} ({})", cudaGetErrorName(e), cudaGetErrorString(e));
    cudaGetLastError();
    return 0;
  }
  if (n == 0 && why) *why = "cudaGetDeviceCount reports no device";
  return n;
}

PinnedHostResource::PinnedHostResource(std::string name, std::size_t limit)
    : MemoryResource(std::move(name)), limit_(limit) {}

void* PinnedHostResource::do_allocate(std::size_t bytes, std::size_t alignment, Stream) {
  RW_EXPECTS(alignment <= 4096, InvalidArgument, "{} '{}': alignment {} exceeds 4096", kind(), name(), alignment);
  if (!counters_.try_reserve(bytes, limit_)) out_of_memory(kind(), name(), bytes, limit_, counters_.in_use());
  void* p = nullptr;
  const cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocDefault);
  if (e != cudaSuccess) {
    counters_.unreserve(bytes);
    cudaGetLastError();
    if (e == cudaErrorMemoryAllocation)
      out_of_memory(kind(), name(), bytes, limit_, counters_.in_use(), "cudaHostAlloc failed");
    check(e, "cudaHostAlloc");
  }
  return p;
}

void PinnedHostResource::do_deallocate(void* p, std::size_t bytes, std::size_t, Stream) {
  RW_CUDA_TRY(cudaFreeHost(p));
  counters_.release(bytes);
}

DeviceResource::DeviceResource(std::string name, int device, std::size_t limit)
    : MemoryResource(std::move(name)), device_(device), limit_(limit) {}

void* DeviceResource::do_allocate(std::size_t bytes, std::size_t alignment, Stream) {
  RW_EXPECTS(alignment <= 256, InvalidArgument, "{} '{}': alignment {} exceeds cudaMalloc's 256",
             kind(), name(), alignment);
  if (!counters_.try_reserve(bytes, limit_)) out_of_memory(kind(), name(), bytes, limit_, counters_.in_use());
  // cudaGetDevice, cudaSetDevice to this resource's GPU, cudaMalloc: the first that fails gives
  // the reservation back and names itself.
  int current = 0;
  cudaError_t e = cudaGetDevice(&current);
  const char* call = "cudaGetDevice";
  if (e == cudaSuccess && current != device_) {
    e = cudaSetDevice(device_);
    call = "cudaSetDevice(device_)";
  }
  void* p = nullptr;
  if (e == cudaSuccess) {
    e = cudaMalloc(&p, bytes);
    call = "cudaMalloc";
    if (current != device_) cudaSetDevice(current);
  }
  if (e != cudaSuccess) {
    counters_.unreserve(bytes);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      out_of_memory(kind(), name(), bytes, limit_, counters_.in_use(), "cudaMalloc failed");
    }
    check(e, call);
  }
  return p;
}

void DeviceResource::do_deallocate(void* p, std::size_t bytes, std::size_t, Stream) {
  RW_CUDA_TRY(cudaFree(p));
  counters_.release(bytes);
}

CudaStreamOrdering::~CudaStreamOrdering() {
  for (Event e : all_) cudaEventDestroy(static_cast<cudaEvent_t>(e));
}

StreamOrdering::Event CudaStreamOrdering::record(Stream stream) {
  cudaEvent_t e = nullptr;
  {
    std::lock_guard lock(mutex_);
    if (!free_.empty()) {
      e = static_cast<cudaEvent_t>(free_.back());
      free_.pop_back();
    }
  }
  if (e == nullptr) {
    RW_CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    std::lock_guard lock(mutex_);
    all_.push_back(e);
  }
  RW_CUDA_TRY(cudaEventRecord(e, static_cast<cudaStream_t>(stream)));
  return e;
}

bool CudaStreamOrdering::completed(Event event) {
  const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(event));
  if (e == cudaErrorNotReady) return false;
  check(e, "cudaEventQuery");
  return true;
}

void CudaStreamOrdering::wait(Event event) {
  RW_CUDA_TRY(cudaEventSynchronize(static_cast<cudaEvent_t>(event)));
}

void CudaStreamOrdering::release(Event event) {
  std::lock_guard lock(mutex_);
  free_.push_back(event);
}

}  // namespace redwood::memory::cuda
