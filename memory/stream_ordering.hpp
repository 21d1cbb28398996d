#pragma once
// StreamOrdering: how a pool learns that the work queued on a stream before a deallocation has
// completed, so that a block freed on one stream is not handed to another too early. CUDA builds
// implement it with pooled cudaEvents (memory/cuda/cuda_resources.hpp); tests use a fake.

#include "memory/resource.hpp"

namespace redwood::memory {

class StreamOrdering {
 public:
  using Event = void*;
  virtual ~StreamOrdering() = default;
  /// An event that completes once the work queued on `stream` so far has completed.
  virtual Event record(Stream stream) = 0;
  /// Whether `event` has completed; never blocks.
  virtual bool completed(Event event) = 0;
  /// Blocks until `event` has completed.
  virtual void wait(Event event) = 0;
  /// Gives `event` back for reuse by record().
  virtual void release(Event event) = 0;
};

}  // namespace redwood::memory
