#pragma once
// FrameMemory: the pool a pipeline's per-frame buffers come from — the pictures sources read,
// the tensors preprocess writes, the batches infer concatenates and splits, the crops of a
// secondary model — so that a pipeline in steady state takes no memory from the system for them:
//
//   HostResource (posix_memalign),  ◄── chunks, only while warming up (upstream counters)
//   or pinned memory (a GPU model)
//        ▲
//   TieredResource "frames"  ◄── allocate / free per buffer: pictures (picture(), and cv::Mat
//                                through mat_allocator()), tensors (empty/zeros), freed when the
//                                last Picture, Mat or Tensor handle to them goes; requests up to
//                                64 KiB and up to 640 KiB in buddy tiers of their own, whose
//                                chunks are blocks of the base pool (memory/tiered.hpp), so that
//                                small buffers do not split the large blocks pictures need
//
// A Frame carries a pointer to its pipeline's FrameMemory; stages ask it for buffers (or the
// plain heap when a frame has none, as in unit tests of a single stage). Every buffer keeps the
// pool alive (shared state), so a tensor or picture that outlives the pipeline stays valid.
//
// When the pool is exhausted, a buffer comes from the heap instead: the frame still runs, and
// `fallbacks` counts it (OpenCV's Mat::create falls back to its default allocator when ours
// throws).

#include "core/tensor.hpp"
#include "memory/resource.hpp"
#include "memory/tiered.hpp"
#include "stages/picture.hpp"

#include <cstdint>
#include <memory>

namespace cv {
class MatAllocator;
}  // namespace cv

namespace redwood {

struct FrameMemoryConfig {
  std::size_t chunk_bytes = memory::kFramePoolChunkBytes;  // the upstream's unit; also the largest buffer
  std::size_t limit_bytes = memory::kFramePoolLimitBytes;  // most bytes the pool takes from the system
  std::size_t reserve_bytes = 0;                           // taken at construction (reserve()), before any frame
  /// Where chunks come from: null for plain host memory (posix_memalign); page-locked memory
  /// (a device backend's pinned resource) when models run on a GPU. Must outlive the pool.
  memory::MemoryResource* upstream = nullptr;
};

struct FrameMemoryStats {
  memory::PoolStats pool;      // the buddy pool (allocations, in use, high water, upstream calls)
  memory::PoolStats upstream;  // its upstream: every call here is a system allocation
  std::uint64_t fallbacks = 0; // buffers that went to the heap because the pool refused them
};

class FrameMemory {
 public:
  explicit FrameMemory(FrameMemoryConfig config = {});
  ~FrameMemory();
  FrameMemory(const FrameMemory&) = delete;
  FrameMemory& operator=(const FrameMemory&) = delete;

  /// Takes at least `bytes` from the system now, in whole chunks (up to the pool's limit), and
  /// keeps them for the frames to come: a run that starts with them makes no system allocation
  /// while frames wait (page-locking gigabytes takes a second or more, during which every
  /// stream stalled and cameras dropped frames). Returns the bytes reserved in all.
  std::size_t reserve(std::size_t bytes);
  /// A contiguous host tensor in pool memory; contents uninitialized.
  Tensor empty(DType dtype, Shape shape);
  /// The same, zero-filled.
  Tensor zeros(DType dtype, Shape shape);
  /// A picture in pool memory (rows contiguous); pixels uninitialized.
  Picture picture(int width, int height, int channels);
  /// Set as a cv::Mat's `allocator` before create()/read(), the Mat's buffer comes from the pool
  /// (frame_mat() in stages/picture_cv.hpp does it).
  cv::MatAllocator* mat_allocator();

  FrameMemoryStats stats() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

/// Pool tensor when `memory` is given, else a plain heap tensor.
Tensor frame_tensor(FrameMemory* memory, DType dtype, Shape shape);
Tensor frame_tensor_zeros(FrameMemory* memory, DType dtype, Shape shape);
/// A pool picture when `memory` is given, else a plain heap picture (Picture::allocate).
Picture frame_picture(FrameMemory* memory, int width, int height, int channels);

}  // namespace redwood
