#pragma once
// RingQueue: a first-in first-out queue over one buffer used as a ring. Pushing at the back and
// popping at the front move no other element, and allocate nothing while the queue holds no more
// than it ever held: the buffer doubles when full and keeps its room. std::deque, the usual
// choice, allocates a block and frees one every few dozen elements as they pass through it,
// which for a queue that every frame passes through is heap traffic every frame.
//
// Elements are default-constructed in place and a popped one is reset to T{}, so that what it
// held (a frame's reference) goes at once.

#include <cassert>
#include <cstddef>
#include <utility>
#include <vector>

namespace redwood {

template <typename T>
class RingQueue {
 public:
  RingQueue() = default;
  /// Room for `capacity` elements now (a bounded queue's bound: it never grows after).
  explicit RingQueue(std::size_t capacity) { reserve(capacity); }

  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  std::size_t capacity() const { return slots_.size(); }

  /// The i-th element from the front (0: the oldest).
  T& operator[](std::size_t i) {
    assert(i < size_);
    return slots_[(head_ + i) % slots_.size()];
  }
  const T& operator[](std::size_t i) const {
    assert(i < size_);
    return slots_[(head_ + i) % slots_.size()];
  }
  T& front() { return (*this)[0]; }
  const T& front() const { return (*this)[0]; }
  T& back() { return (*this)[size_ - 1]; }

  template <typename... Args>
  T& emplace_back(Args&&... args) {
    if (size_ == slots_.size()) reserve(slots_.empty() ? 8 : 2 * slots_.size());
    T& slot = slots_[(head_ + size_) % slots_.size()];
    slot = T(std::forward<Args>(args)...);
    ++size_;
    return slot;
  }
  void push_back(T value) { emplace_back(std::move(value)); }

  void pop_front() {
    assert(size_ > 0);
    slots_[head_] = T{};
    head_ = (head_ + 1) % slots_.size();
    --size_;
  }
  void pop_back() {
    assert(size_ > 0);
    back() = T{};
    --size_;
  }
  void clear() {
    while (size_ > 0) pop_back();
    head_ = 0;
  }

  /// Room for at least `capacity` elements, the present ones moved to its start.
  void reserve(std::size_t capacity) {
    if (capacity <= slots_.size()) return;
    std::vector<T> grown(capacity);
    for (std::size_t i = 0; i < size_; ++i) grown[i] = std::move((*this)[i]);
    slots_ = std::move(grown);
    head_ = 0;
  }

 private:
  std::vector<T> slots_;
  std::size_t head_ = 0, size_ = 0;
};

}  // namespace redwood
