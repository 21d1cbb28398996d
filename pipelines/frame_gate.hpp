#pragma once
// Back-pressure for one stream, in two parts:
//
//   source thread ──► FrameQueue ──► pump thread ──(token)──► flow graph ──► sequencer ──(release)
//                     block | drop oldest          TokenLimiter: at most max_in_flight frames
//
// TokenLimiter bounds the frames of a stream inside the graph (MediaPipe's flow limiter): the
// pump takes a token before a frame enters, the sequencer gives it back once sinks have the
// frame. A slow stage therefore stalls the pump, the queue fills, and then the source: a file
// source blocks (never drops), a live source drops its oldest waiting frame and counts it.

#include "core/ring_queue.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>

namespace redwood {

class TokenLimiter {
 public:
  explicit TokenLimiter(int tokens) : free_(tokens) {}
  /// Takes a token; false when woken by cancel().
  bool acquire() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return free_ > 0 || cancelled_; });
    if (cancelled_) return false;
    --free_;
    return true;
  }
  void release() {
    {
      std::lock_guard lock(mutex_);
      ++free_;
    }
    cv_.notify_one();
  }
  void cancel() {
    {
      std::lock_guard lock(mutex_);
      cancelled_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int free_;
  bool cancelled_ = false;
};

/// A bounded queue between a source's reader and its pump. push() blocks when full unless
/// drop_oldest, in which case it evicts the oldest item and returns true (a drop). The items wait
/// in a ring of `capacity` places: a frame passing through allocates nothing.
template <typename T>
class FrameQueue {
 public:
  FrameQueue(std::size_t capacity, bool drop_oldest) : items_(capacity), capacity_(capacity), drop_oldest_(drop_oldest) {}

  /// Returns true when an older item was dropped to make room.
  bool push(T item) {
    std::unique_lock lock(mutex_);
    bool dropped = false;
    if (drop_oldest_) {
      if (items_.size() >= capacity_) {
        items_.pop_front();
        dropped = true;
      }
    } else {
      not_full_.wait(lock, [&] { return items_.size() < capacity_ || closed_; });
      if (closed_) return false;
    }
    items_.push_back(std::move(item));
    not_empty_.notify_one();
    return dropped;
  }

  /// The next item; nullopt once closed and empty.
  std::optional<T> pop() {
    std::unique_lock lock(mutex_);
    not_empty_.wait(lock, [&] { return !items_.empty() || closed_ || finished_; });
    if (items_.empty() || closed_) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    not_full_.notify_one();
    return item;
  }

  /// No more pushes; pop drains what is there.
  void finish() {
    std::lock_guard lock(mutex_);
    finished_ = true;
    not_empty_.notify_all();
  }
  /// Stop now: pending items are discarded (their count returned) and waiters wake.
  std::size_t close() {
    std::lock_guard lock(mutex_);
    closed_ = true;
    const std::size_t n = items_.size();
    items_.clear();
    not_empty_.notify_all();
    not_full_.notify_all();
    return n;
  }
  std::size_t size() {
    std::lock_guard lock(mutex_);
    return items_.size();
  }

 private:
  std::mutex mutex_;
  std::condition_variable not_empty_, not_full_;
  RingQueue<T> items_;
  std::size_t capacity_;
  bool drop_oldest_;
  bool finished_ = false, closed_ = false;
};

}  // namespace redwood
