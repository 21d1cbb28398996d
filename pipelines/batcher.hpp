#pragma once
// Batcher: collects frames of every stream for a stage that batches or completes frames later
// (infer), and hands each batch to the stage from a thread of its own, never a oneTBB worker:
//
//   frames of all streams ──push──► queue ──(batch full, or the wait is over)──► dispatch(batch)
//                                   highest priority first,                      may wait for a
//                                   then oldest first                            free runner slot
//
// A batch goes when it holds max_batch frames, when its first frame has waited timeout_ms, or
// earlier when the oldest frame's age plus the batch's expected time would pass the latency
// budget: a frame read long ago is not kept waiting for company. A frame already past its budget
// does not hurry its batch (overload would otherwise become a stream of small batches). dispatch() takes the batch and
// is responsible for the frames from then on (the stage completes them and hands them on).

#include "stages/stage.hpp"

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace redwood {

struct BatchPolicy {
  int max_batch = 1;
  double timeout_ms = 0;         // how long a partial batch waits for more frames
  double latency_budget_ms = 0;  // 0: none
  std::function<double()> expected_batch_ms;  // what a batch is expected to take (the stage's estimate)
};

class Batcher {
 public:
  Batcher(BatchPolicy policy, std::function<void(std::vector<FramePtr>)> dispatch);
  ~Batcher();
  void push(FramePtr frame);
  /// Dispatches what is queued, then ends the thread.
  void finish();

  /// Picks up to `max` frames: highest priority first, oldest (earliest pushed) first within a
  /// priority; removes them from `queue`. Exposed for tests.
  static std::vector<FramePtr> take(std::deque<std::pair<FramePtr, Clock::time_point>>& queue, int max);

 private:
  void loop();
  Clock::time_point deadline() const;  // mutex_ held, queue_ not empty

  BatchPolicy policy_;
  std::function<void(std::vector<FramePtr>)> dispatch_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::pair<FramePtr, Clock::time_point>> queue_;  // frame, when it was pushed
  bool finishing_ = false;
  std::thread thread_;
};

}  // namespace redwood
