// The batcher of batching and asynchronous stages: a full batch goes at once, a partial one after
// the timeout, or earlier when the oldest frame's latency budget says so; higher priorities go
// first, the oldest first within a priority; dispatch runs on the batcher's own thread.

#include "pipelines/batcher.hpp"

#include <gtest/gtest.h>

#include <future>
#include <initializer_list>
#include <tuple>

namespace redwood {
namespace {

FramePtr frame(int stream, std::int64_t seq, int priority = 0, Clock::time_point read_at = Clock::now()) {
  auto f = std::make_shared<Frame>();
  f->stream = stream;
  f->seq = seq;
  f->priority = priority;
  f->read_at = read_at;
  return f;
}

using Ids = std::vector<std::pair<int, std::int64_t>>;  // (stream, seq) of each frame

Ids ids(const std::vector<FramePtr>& batch) {
  Ids out;
  for (const auto& f : batch) out.emplace_back(f->stream, f->seq);
  return out;
}

/// A batcher's queue of frames (stream, seq, priority), in push order.
Batcher::Queue queue_of(std::initializer_list<std::tuple<int, std::int64_t, int>> frames) {
  Batcher::Queue queue;
  const auto now = Clock::now();
  for (auto [stream, seq, priority] : frames) queue.emplace_back(frame(stream, seq, priority), now);
  return queue;
}

/// The frames take() moves into a batch of at most `max`.
Ids take(Batcher::Queue& queue, int max) {
  std::vector<FramePtr> batch;
  Batcher::take(queue, max, batch);
  return ids(batch);
}

TEST(Batcher, TakesHigherPrioritiesFirstThenTheOldest) {
  Batcher::Queue queue = queue_of({{0, 0, 0}, {1, 0, 5}, {0, 1, 0}, {2, 0, 1}, {1, 1, 5}});
  // Priority 5 (oldest first), then 1; the batch keeps push order among what it took.
  EXPECT_EQ(take(queue, 3), (Ids{{1, 0}, {2, 0}, {1, 1}}));
  EXPECT_EQ(take(queue, 3), (Ids{{0, 0}, {0, 1}}));
  EXPECT_TRUE(queue.empty());
}

TEST(Batcher, TakesOnlyTheOldestAtTheLowestPriorityItReaches) {
  Batcher::Queue queue = queue_of({{0, 0, 1}, {1, 0, 0}, {0, 1, 1}, {0, 2, 1}, {2, 0, 2}});
  // Priority 2's frame, then the two oldest of priority 1; the rest stays queued in push order.
  EXPECT_EQ(take(queue, 3), (Ids{{0, 0}, {0, 1}, {2, 0}}));
  ASSERT_EQ(queue.size(), 2u);
  EXPECT_EQ(queue[0].first->stream, 1);
  EXPECT_EQ(take(queue, 1), (Ids{{0, 2}}));
  EXPECT_EQ(take(queue, 1), (Ids{{1, 0}}));
  EXPECT_TRUE(queue.empty());
}

TEST(Batcher, AFullBatchGoesAtOnceAndAPartialOneAfterTheTimeout) {
  std::promise<std::vector<FramePtr>> first, second;
  int calls = 0;
  std::thread::id dispatcher;
  BatchPolicy policy;
  policy.max_batch = 2;
  policy.timeout_ms = 60'000;
  Batcher batcher(policy, [&](std::vector<FramePtr> batch) {
    dispatcher = std::this_thread::get_id();
    (calls++ == 0 ? first : second).set_value(std::move(batch));
  });
  batcher.push(frame(0, 0));
  batcher.push(frame(1, 0));
  auto full = first.get_future();
  ASSERT_EQ(full.wait_for(std::chrono::seconds(10)), std::future_status::ready);  // not the minute's timeout
  EXPECT_EQ(full.get().size(), 2u);
  EXPECT_NE(dispatcher, std::this_thread::get_id());
  batcher.push(frame(0, 1));
  batcher.finish();  // a partial batch goes at the end too
  EXPECT_EQ(second.get_future().get().size(), 1u);
}

TEST(Batcher, TheLatencyBudgetSendsAnOldFrameBeforeTheTimeout) {
  std::promise<std::vector<FramePtr>> sent;
  // Read 900 ms ago, a budget of 1 s and a batch expected to take 50 ms: it must go within 50 ms,
  // not after the minute the timeout allows.
  BatchPolicy policy;
  policy.max_batch = 8;
  policy.timeout_ms = 60'000;
  policy.latency_budget_ms = 1000;
  policy.expected_batch_ms = [] { return 50.0; };
  Batcher batcher(policy, [&](std::vector<FramePtr> batch) { sent.set_value(std::move(batch)); });
  batcher.push(frame(0, 0, 0, Clock::now() - std::chrono::milliseconds(900)));
  auto f = sent.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(f.get().size(), 1u);
  batcher.finish();
}

TEST(Batcher, AFramePastItsBudgetWaitsForItsBatchAsAnyOther) {
  std::promise<std::vector<FramePtr>> sent;
  // Read 2 s ago against a budget of 1 s: late already, so the batch waits for its timeout (or
  // to be full) rather than going alone at once.
  BatchPolicy policy;
  policy.max_batch = 2;
  policy.timeout_ms = 60'000;
  policy.latency_budget_ms = 1000;
  Batcher batcher(policy, [&](std::vector<FramePtr> batch) { sent.set_value(std::move(batch)); });
  batcher.push(frame(0, 0, 0, Clock::now() - std::chrono::milliseconds(2000)));
  auto f = sent.get_future();
  EXPECT_EQ(f.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  batcher.push(frame(1, 0));
  ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(f.get().size(), 2u);
  batcher.finish();
}

}  // namespace
}  // namespace redwood
