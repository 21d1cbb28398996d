#include "pipelines/batcher.hpp"

#include "core/thread_name.hpp"

#include <algorithm>

namespace redwood {

Batcher::Batcher(BatchPolicy policy, std::function<void(std::vector<FramePtr>)> dispatch)
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

std::vector<FramePtr> Batcher::take(std::deque<std::pair<FramePtr, Clock::time_point>>& queue, int max) {
  std::vector<FramePtr> batch;
  const auto n = std::min<std::size_t>(queue.size(), static_cast<std::size_t>(std::max(max, 1)));
  const bool one_priority = std::all_of(queue.begin(), queue.end(), [&](const auto& e) {
    return e.first->priority == queue.front().first->priority;
  });
  if (one_priority) {
    for (std::size_t i = 0; i < n; ++i) {
      batch.push_back(std::move(queue.front().first));
      queue.pop_front();
    }
    return batch;
  }
  // The queue is in push order: a stable sort by priority keeps the oldest first within one.
  std::vector<std::size_t> order(queue.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return queue[a].first->priority > queue[b].first->priority; });
  order.resize(n);
  std::sort(order.begin(), order.end());
  for (std::size_t i : order) batch.push_back(std::move(queue[i].first));
  for (std::size_t k = order.size(); k-- > 0;) queue.erase(queue.begin() + static_cast<std::ptrdiff_t>(order[k]));
  return batch;
}

Clock::time_point Batcher::deadline() const {
  const Clock::time_point first = queue_.front().second;
  auto at = first + std::chrono::microseconds(static_cast<std::int64_t>(policy_.timeout_ms * 1000.0));
  if (policy_.latency_budget_ms > 0) {
    // The oldest frame must finish within the budget of its read; leave the batch its time.
    Clock::time_point oldest = queue_.front().first->read_at;
    for (const auto& e : queue_) oldest = std::min(oldest, e.first->read_at);
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
  for (;;) {
    std::vector<FramePtr> batch;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return !queue_.empty() || finishing_; });
      if (queue_.empty()) return;  // finishing and drained
      // A partial batch waits a little for frames of other streams (the deadline moves as they
      // come: an older frame may join with a tighter budget).
      while (static_cast<int>(queue_.size()) < policy_.max_batch && !finishing_) {
        if (cv_.wait_until(lock, deadline()) == std::cv_status::timeout && Clock::now() >= deadline()) break;
      }
      batch = take(queue_, policy_.max_batch);
    }
    dispatch_(std::move(batch));
  }
}

}  // namespace redwood
