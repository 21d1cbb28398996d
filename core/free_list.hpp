#pragma once
// FreeList: objects kept for reuse, each with the room its buffers grew to. A user takes one,
// uses it and gives it back; the next taker, on whichever thread, gets the one given back last.
// Two ways to take:
//   - take(): a lease for a call's scratch, given back when it goes (the stages' buffers: kept
//     per thread instead, they would grow once for each worker thread of a many-core host that
//     runs the stage, for hundreds of frames);
//   - acquire() / release(): for a record whose use ends on another thread, later (an asynchronous
//     call's or batch's, which a continuation holds by pointer).
// It makes an object only when every one is out, so it holds as many as were ever out at once;
// fill() makes them up front, so that none is made in the middle of a run.

#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace redwood {

template <class T>
class FreeList {
 public:
  /// One object, given back when the lease goes.
  class Lease {
   public:
    Lease(FreeList* list, T* item) : list_(list), item_(item) {}
    Lease(Lease&& other) noexcept : list_(other.list_), item_(std::exchange(other.item_, nullptr)) {}
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() {
      if (item_ != nullptr) list_->release(item_);
    }
    T& operator*() const { return *item_; }
    T* operator->() const { return item_; }

   private:
    FreeList* list_;
    T* item_;
  };

  FreeList() = default;
  FreeList(const FreeList&) = delete;
  FreeList& operator=(const FreeList&) = delete;

  Lease take() { return Lease(this, acquire()); }

  /// The object given back last, or a new one when every object is out. The caller owns it
  /// until release().
  T* acquire() {
    {
      std::lock_guard lock(mutex_);
      if (!idle_.empty()) {
        T* item = idle_.back().release();
        idle_.pop_back();
        return item;
      }
    }
    return new T();
  }

  /// Gives back an object from acquire().
  void release(T* item) {
    std::lock_guard lock(mutex_);
    idle_.emplace_back(item);
  }

  /// Makes objects until `count` are idle, each set up by `init(T&)`.
  template <class Init>
  void fill(std::size_t count, Init&& init) {
    std::lock_guard lock(mutex_);
    idle_.reserve(count);
    while (idle_.size() < count) {
      auto item = std::make_unique<T>();
      init(*item);
      idle_.push_back(std::move(item));
    }
  }

  /// How many objects are idle now (those out not counted).
  std::size_t idle() const {
    std::lock_guard lock(mutex_);
    return idle_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<T>> idle_;
};

}  // namespace redwood
