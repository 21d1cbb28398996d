#include "pipelines/batcher.hpp"

namespace redwood {

Batcher::Batcher(int max_batch, double timeout_ms, std::function<void(std::vector<FramePtr>&)> run_batch,
                 std::function<void(FramePtr)> forward)
    : max_batch_(max_batch), timeout_(static_cast<std::int64_t>(timeout_ms * 1000.0)),
      run_batch_(std::move(run_batch)), forward_(std::move(forward)), thread_([this] { loop(); }) {}

Batcher::~Batcher() { finish(); }

void Batcher::push(FramePtr frame) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(frame));
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

void Batcher::loop() {
  for (;;) {
    std::vector<FramePtr> batch;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return !queue_.empty() || finishing_; });
      if (queue_.empty()) return;  // finishing and drained
      // A partial batch waits a little for frames of other streams.
      cv_.wait_for(lock, timeout_, [&] { return static_cast<int>(queue_.size()) >= max_batch_ || finishing_; });
      while (!queue_.empty() && static_cast<int>(batch.size()) < max_batch_) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    run_batch_(batch);
    for (auto& f : batch) forward_(std::move(f));
  }
}

}  // namespace redwood
