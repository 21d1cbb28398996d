#include "memory/liveness_planner.hpp"

#include "core/error.hpp"

#include <gtest/gtest.h>

#include <random>

namespace redwood::memory {
namespace {

bool lifetimes_overlap(const TensorLifetime& a, const TensorLifetime& b) {
  return a.first_step <= b.last_step && b.first_step <= a.last_step;
}

void expect_valid(const std::vector<TensorLifetime>& t, const WorkspacePlan& plan, std::size_t alignment) {
  ASSERT_EQ(plan.offsets.size(), t.size());
  for (std::size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(plan.offsets[i] % alignment, 0u);
    EXPECT_LE(plan.offsets[i] + t[i].bytes, plan.workspace_bytes);
    for (std::size_t j = i + 1; j < t.size(); ++j) {
      if (t[i].bytes == 0 || t[j].bytes == 0 || !lifetimes_overlap(t[i], t[j])) continue;
      const bool disjoint = plan.offsets[i] + t[i].bytes <= plan.offsets[j] ||
                            plan.offsets[j] + t[j].bytes <= plan.offsets[i];
      ASSERT_TRUE(disjoint) << "tensors " << i << " and " << j << " are live together and overlap";
    }
  }
  EXPECT_GE(plan.workspace_bytes, plan.lower_bound);
}

TEST(LivenessPlanner, SharesBytesBetweenTensorsThatAreNeverLiveTogether) {
  const std::vector<TensorLifetime> t = {{4096, 0, 1}, {2048, 1, 3}, {4096, 3, 4}};
  const WorkspacePlan plan = plan_workspace(t, 256);
  expect_valid(t, plan, 256);
  EXPECT_EQ(plan.offsets[0], plan.offsets[2]);
  EXPECT_EQ(plan.lower_bound, 6144u);
  EXPECT_EQ(plan.workspace_bytes, 6144u);
  EXPECT_DOUBLE_EQ(plan.ratio(), 1.0);
}

TEST(LivenessPlanner, LowerBoundIsThePeakOfAlignedLiveBytes) {
  const std::vector<TensorLifetime> t = {{100, 0, 0}, {100, 0, 2}, {1000, 2, 2}, {1, 5, 6}};
  EXPECT_EQ(workspace_lower_bound(t, 256), 256u + 1024u);
  EXPECT_EQ(workspace_lower_bound({}, 256), 0u);
}

TEST(LivenessPlanner, ChainOfLayersNeedsTwoBuffers) {
  std::vector<TensorLifetime> t;
  for (int i = 0; i < 50; ++i) t.push_back({1 << 20, i, i + 1});  // each read by the next layer
  const WorkspacePlan plan = plan_workspace(t, 256);
  expect_valid(t, plan, 256);
  EXPECT_EQ(plan.workspace_bytes, 2u << 20);
}

TEST(LivenessPlanner, RandomInstancesNeverOverlapAndStayNearTheBound) {
  std::mt19937 rng(42);
  double worst = 1.0;
  for (int instance = 0; instance < 200; ++instance) {
    const int steps = 1 + static_cast<int>(rng() % 40);
    const int n = 1 + static_cast<int>(rng() % 60);
    std::vector<TensorLifetime> t;
    for (int i = 0; i < n; ++i) {
      const std::int64_t first = rng() % steps;
      const std::int64_t last = first + static_cast<std::int64_t>(rng() % 6);
      const std::size_t bytes = (rng() % 8 == 0) ? 0 : 1 + rng() % (1 << (8 + rng() % 12));
      t.push_back({bytes, first, last});
    }
    const std::size_t alignment = std::size_t{1} << (rng() % 9);
    const WorkspacePlan plan = plan_workspace(t, alignment);
    expect_valid(t, plan, alignment);
    if (HasFatalFailure()) return;
    worst = std::max(worst, plan.ratio());
  }
  EXPECT_LT(worst, 2.0) << "greedy by size should stay within 2x of the bound on these instances";
}

TEST(LivenessPlanner, RejectsBackwardLifetimesAndBadAlignment) {
  EXPECT_THROW(plan_workspace({{10, 3, 2}}), InvalidArgument);
  EXPECT_THROW(plan_workspace({{10, 0, 1}}, 3), InvalidArgument);
}

}  // namespace
}  // namespace redwood::memory
