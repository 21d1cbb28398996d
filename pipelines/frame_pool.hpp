#pragma once
// FramePool: Frame objects are recycled, not made anew per frame. A frame goes back to the pool
// when its last FramePtr goes (after the sinks had it); it is reset there — its picture and
// tensors return their buffers to the FrameMemory pool, its detections and stage marks keep their
// capacity — and the next frame a source reads reuses it. At most about (queue + max_in_flight +
// 2) frames per stream exist at once, so `created()` stops growing after warm-up.

#include "core/recycling_allocator.hpp"
#include "stages/frame.hpp"

#include <memory>
#include <mutex>
#include <vector>

namespace redwood {

class FramePool {
 public:
  FramePool() : shared_(std::make_shared<Shared>()) {}

  /// A clean Frame (as if new), from the free list when one is there.
  FramePtr acquire() {
    std::unique_ptr<Frame> frame;
    {
      std::lock_guard lock(shared_->mutex);
      if (!shared_->free.empty()) {
        frame = std::move(shared_->free.back());
        shared_->free.pop_back();
      }
    }
    if (!frame) {
      frame = std::make_unique<Frame>();
      std::lock_guard lock(shared_->mutex);
      ++shared_->created;
    }
    // The deleter holds the free list (not the pool), so a frame may outlive the pool; the
    // handle's control block is recycled too (no heap allocation once warm).
    return FramePtr(
        frame.release(),
        [shared = shared_](Frame* f) {
          reset(*f);
          std::lock_guard lock(shared->mutex);
          shared->free.emplace_back(f);
        },
        RecyclingAllocator<Frame>());
  }

  /// Frame objects made so far (the rest were reused).
  std::int64_t created() const {
    std::lock_guard lock(shared_->mutex);
    return shared_->created;
  }

 private:
  static void reset(Frame& f) {
    f.image = {};
    f.memory = nullptr;
    f.tensors.clear();
    f.transforms.clear();
    f.detections.clear();
    // Each crops stage's list is emptied, not dropped: its room serves the next frame's crops.
    for (auto& [name, parents] : f.crop_parents) parents.clear();
    f.classes.clear();
    f.events.clear();
    f.overlays.clear();
    f.stage_done.clear();
    f.failed = false;
    f.stream = 0;
    f.seq = f.admitted = 0;
    f.pts_ms = 0;
  }

  struct Shared {
    std::mutex mutex;
    std::vector<std::unique_ptr<Frame>> free;
    std::int64_t created = 0;
  };
  std::shared_ptr<Shared> shared_;
};

}  // namespace redwood
