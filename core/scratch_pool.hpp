#pragma once
// Scratch objects shared by the calls of one stage: a call takes one, works in its buffers and
// gives it back, and the next call (on whichever thread) gets the one given back last. Buffers
// kept per thread instead (thread_local) grow once per thread that runs the stage, and a stage
// whose calls hop between a 16-core host's worker threads keeps growing them for hundreds of
// frames; a pool grows as many sets as calls ever ran at once.

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace redwood {

template <class T>
class ScratchPool {
 public:
  /// One scratch object, given back when the lease goes.
  class Lease {
   public:
    Lease(ScratchPool* pool, std::unique_ptr<T> item) : pool_(pool), item_(std::move(item)) {}
    Lease(Lease&& other) noexcept = default;
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() {
      if (item_) pool_->give_back(std::move(item_));
    }
    T& operator*() const { return *item_; }
    T* operator->() const { return item_.get(); }

   private:
    ScratchPool* pool_;
    std::unique_ptr<T> item_;
  };

  /// The object given back last, or a new one when every object is out.
  Lease take() {
    {
      std::lock_guard lock(mutex_);
      if (!free_.empty()) {
        std::unique_ptr<T> item = std::move(free_.back());
        free_.pop_back();
        return Lease(this, std::move(item));
      }
    }
    return Lease(this, std::make_unique<T>());
  }

  /// How many objects the pool holds now (those out on lease not counted).
  std::size_t idle() const {
    std::lock_guard lock(mutex_);
    return free_.size();
  }

 private:
  void give_back(std::unique_ptr<T> item) {
    std::lock_guard lock(mutex_);
    free_.push_back(std::move(item));
  }

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<T>> free_;
};

}  // namespace redwood
