#pragma once
// RAII owners of CUDA streams and events. Construction throws CudaError naming the call;
// destruction never throws (a failure is logged).

#include <cuda_runtime_api.h>

namespace redwood::cuda {

/// A non-blocking CUDA stream (it does not synchronize with the legacy default stream).
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(Stream&& other) noexcept : stream_(other.stream_) { other.stream_ = nullptr; }
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return stream_; }
  /// Blocks until everything queued so far has run; throws CudaError if any of it failed.
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

/// A CUDA event; with timing on, two recorded events give the elapsed device time between them.
/// With blocking_sync, synchronize() sleeps until the event completes instead of spinning a core.
class Event {
 public:
  explicit Event(bool timing = false, bool blocking_sync = false);
  ~Event();
  Event(Event&& other) noexcept : event_(other.event_) { other.event_ = nullptr; }
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream);
  /// Makes `stream` wait (on the device) for the work this event recorded.
  void wait_on(cudaStream_t stream) const;
  void synchronize() const;
  /// Whether the recorded work has completed.
  bool query() const;
  /// Milliseconds from `start` to this event (both recorded, timing on, this one completed).
  float elapsed_ms_since(const Event& start) const;

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace redwood::cuda
