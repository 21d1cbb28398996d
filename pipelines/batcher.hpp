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
// does not hurry its batch (overload would otherwise become a stream of small batches). dispatch() takes the batch's frames
// and is responsible for them from then on (the stage completes them and hands them on).
//
// In steady state the batcher allocates nothing: the queue is a ring and the batch a vector the
// batcher keeps, both with the room of the most frames they ever held.

#include "core/ring_queue.hpp"
#include "stages/stage.hpp"

#include <condition_variable>
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
  using Queue = RingQueue<std::pair<FramePtr, Clock::time_point>>;  // frame, when it was pushed
  /// Gets each batch, its frames to take (moved out); what it leaves there is dropped after.
  using Dispatch = std::function<void(std::vector<FramePtr>& batch)>;

  Batcher(BatchPolicy policy, Dispatch dispatch);
  ~Batcher();
  void push(FramePtr frame);
  /// Dispatches what is queued, then ends the thread.
  void finish();

  /// Moves up to `max` frames from `queue` into `batch` (emptied first): highest priority first,
  /// oldest (earliest pushed) first within a priority, the batch in push order. Exposed for tests.
  static void take(Queue& queue, int max, std::vector<FramePtr>& batch);

 private:
  void loop();
  Clock::time_point deadline() const;  // mutex_ held, queue_ not empty

  BatchPolicy policy_;
  Dispatch dispatch_;
  std::mutex mutex_;
  std::condition_variable cv_;
  Queue queue_;
  bool finishing_ = false;
  std::vector<FramePtr> batch_;  // the batch being dispatched (the batcher's thread's)
  std::thread thread_;
};

}  // namespace redwood
