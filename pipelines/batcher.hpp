#pragma once
// Batcher: collects frames of every stream for a stage that batches (infer), up to
// max_batch frames or until the first waiting frame has waited timeout_ms, runs the stage once
// on them on its own thread (the stage is serial: one executor), and hands each frame on.

#include "stages/stage.hpp"

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace redwood {

class Batcher {
 public:
  /// run_batch processes a batch (and deals with its errors); forward hands one frame on.
  Batcher(int max_batch, double timeout_ms, std::function<void(std::vector<FramePtr>&)> run_batch,
          std::function<void(FramePtr)> forward);
  ~Batcher();
  void push(FramePtr frame);
  /// Processes what is queued, then ends the thread.
  void finish();

 private:
  void loop();

  int max_batch_;
  std::chrono::microseconds timeout_;
  std::function<void(std::vector<FramePtr>&)> run_batch_;
  std::function<void(FramePtr)> forward_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<FramePtr> queue_;
  bool finishing_ = false;
  std::thread thread_;
};

}  // namespace redwood
