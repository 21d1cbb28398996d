#include "backends/cuda/stream.hpp"

#include "backends/cuda/cuda_check.hpp"

#include <utility>

namespace redwood::cuda {

Stream::Stream() { RW_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }

Stream::~Stream() {
  if (stream_ != nullptr) RW_CUDA_WARN(cudaStreamDestroy(stream_));
}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (stream_ != nullptr) RW_CUDA_WARN(cudaStreamDestroy(stream_));
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

void Stream::synchronize() const { RW_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

Event::Event(bool timing, bool blocking_sync) {
  const unsigned flags = (timing ? cudaEventDefault : cudaEventDisableTiming) | (blocking_sync ? cudaEventBlockingSync : 0u);
  RW_CUDA_CHECK(cudaEventCreateWithFlags(&event_, flags));
}

Event::~Event() {
  if (event_ != nullptr) RW_CUDA_WARN(cudaEventDestroy(event_));
}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr) RW_CUDA_WARN(cudaEventDestroy(event_));
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

void Event::record(cudaStream_t stream) { RW_CUDA_CHECK(cudaEventRecord(event_, stream)); }

void Event::wait_on(cudaStream_t stream) const { RW_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0)); }

void Event::synchronize() const { RW_CUDA_CHECK(cudaEventSynchronize(event_)); }

bool Event::query() const {
  const cudaError_t err = cudaEventQuery(event_);
  if (err == cudaErrorNotReady) return false;
  RW_CUDA_CHECK(err);
  return true;
}

float Event::elapsed_ms_since(const Event& start) const {
  float ms = 0;
  RW_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

}  // namespace redwood::cuda
