#include "pipelines/batcher.hpp"

#include "core/thread_name.hpp"

#include <algorithm>

namespace redwood {

Batcher::Batcher(BatchPolicy policy, Dispatch dispatch)
    : policy_(std::move(policy)), dispatch_(std::move(dispatch)), thread_([this] { loop(); }) {}

Batcher::~Batcher() { finish(); }

void Batcher::push(FramePtr frame) {
  {
    std::lock_guard lock(mutex_);
    queue_.emplace_back(std::move(frame), Clock::now());
  }
  cv_.notify_one();
}

void Batcher::finish() {
  {
    std::lock_guard lock(mutex_);
    finishing_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void Batcher::take(Queue& queue, int max, std::vector<FramePtr>& batch) {
  batch.clear();
  const auto n = std::min<std::size_t>(queue.size(), static_cast<std::size_t>(std::max(max, 1)));
  if (n == 0) return;
  const auto priority = [&](std::size_t i) { return queue[i].first->priority; };
  bool one_priority = true;
  for (std::size_t i = 1; i < queue.size() && one_priority; ++i) one_priority = priority(i) == priority(0);
  if (one_priority) {
    for (std::size_t i = 0; i < n; ++i) {
      batch.push_back(std::move(queue.front().first));
      queue.pop_front();
    }
    return;
  }
  // The lowest priority the batch reaches (`cut`), stepping down through those present: every
  // frame above it goes, and the oldest at it up to the batch's size.
  int cut = priority(0);
  for (std::size_t i = 1; i < queue.size(); ++i) cut = std::max(cut, priority(i));
  std::size_t above = 0;  // frames of a priority above `cut`
  for (;;) {
    std::size_t at = 0, below = 0;
    int next = cut;  // the highest priority below `cut`
    for (std::size_t i = 0; i < queue.size(); ++i) {
      if (priority(i) == cut) {
        ++at;
      } else if (priority(i) < cut) {
        next = below++ == 0 ? priority(i) : std::max(next, priority(i));
      }
    }
    if (above + at >= n) break;
    above += at;
    cut = next;  // there is one: fewer than n frames, n <= queue.size(), are at `cut` or above
  }
  // One pass in push order: the frames taken into the batch, the others moved up over the gaps.
  std::size_t quota = n - above, kept = 0;
  for (std::size_t i = 0; i < queue.size(); ++i) {
    const int p = priority(i);
    if (p > cut || (p == cut && quota > 0)) {
      if (p == cut) --quota;
      batch.push_back(std::move(queue[i].first));
    } else {
      if (kept != i) queue[kept] = std::move(queue[i]);
      ++kept;
    }
  }
  while (queue.size() > kept) queue.pop_back();
}

Clock::time_point Batcher::deadline() const {
  const Clock::time_point first = queue_.front().second;
  auto at = first + std::chrono::microseconds(static_cast<std::int64_t>(policy_.timeout_ms * 1000.0));
  if (policy_.latency_budget_ms > 0) {
    // The oldest frame must finish within the budget of its read; leave the batch its time.
    Clock::time_point oldest = queue_.front().first->read_at;
    for (std::size_t i = 0; i < queue_.size(); ++i) oldest = std::min(oldest, queue_[i].first->read_at);
    const double expected = policy_.expected_batch_ms ? policy_.expected_batch_ms() : 0;
    const auto budget = std::chrono::microseconds(static_cast<std::int64_t>((policy_.latency_budget_ms - expected) * 1000.0));
    // A frame already past its budget when its batch started gathering is not saved by going
    // early: the batch then waits its timeout as any other, since under overload small batches
    // would only lower the throughput that every later frame depends on.
    if (oldest + budget >= first) at = std::min(at, oldest + budget);
  }
  return at;
}

void Batcher::loop() {
  set_thread_name("rw-batch");
  batch_.reserve(static_cast<std::size_t>(std::max(policy_.max_batch, 1)));
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return !queue_.empty() || finishing_; });
      if (queue_.empty()) return;  // finishing and drained
      // A partial batch waits a little for frames of other streams (the deadline moves as they
      // come: an older frame may join with a tighter budget).
      while (static_cast<int>(queue_.size()) < policy_.max_batch && !finishing_) {
        if (cv_.wait_until(lock, deadline()) == std::cv_status::timeout && Clock::now() >= deadline()) break;
      }
      take(queue_, policy_.max_batch, batch_);
    }
    dispatch_(batch_);
    batch_.clear();  // what dispatch left (nothing, when it took the frames); the room stays
  }
}

}  // namespace redwood
