#pragma once
// Liveness planner: packs a subgraph's intermediate tensors into one workspace, so that a model
// runs with a single allocation (the static level of the memory design: the CPU executable's and
// the runtime schedule's workspaces are planned with it, runtime/executor.hpp and
// runtime/schedule.hpp). Tensors whose lifetimes overlap get disjoint byte ranges; tensors that
// are never live at the same step may share bytes. Pure: it touches no memory.
//
//   step:    0   1   2   3   4
//   a (4 KiB) [=======]               offsets: a -> 0, b -> 4 KiB, c -> 0 (a is dead by then)
//   b (2 KiB)     [===========]
//   c (4 KiB)             [=======]
//
// Greedy: tensors in some order, each at the best-fitting aligned gap among the already placed
// tensors whose lifetimes intersect its own; three orders are tried (by size, by size times
// lifetime, by first step) and the smallest workspace is kept. The result is compared with the
// lower bound no packing can beat: the largest sum of live (aligned) bytes at any step.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace redwood::memory {

/// A tensor that lives from the step that writes it to the last step that reads it, inclusive.
struct TensorLifetime {
  std::size_t bytes = 0;
  std::int64_t first_step = 0;
  std::int64_t last_step = 0;
};

struct WorkspacePlan {
  std::vector<std::size_t> offsets;  // one per input tensor, in input order
  std::size_t workspace_bytes = 0;   // one allocation of this size holds every tensor
  std::size_t lower_bound = 0;       // max over steps of the live aligned bytes
  /// workspace_bytes / lower_bound (1.0 is optimal; 1.0 when both are 0).
  double ratio() const {
    return lower_bound == 0 ? 1.0 : static_cast<double>(workspace_bytes) / static_cast<double>(lower_bound);
  }
};

/// Plans offsets aligned to `alignment` (a power of two). Throws InvalidArgument for a tensor
/// whose last_step precedes its first_step or a bad alignment. O(n^2) in the number of tensors.
WorkspacePlan plan_workspace(const std::vector<TensorLifetime>& tensors, std::size_t alignment = 256);

/// The lower bound alone: max over steps of the sum of aligned bytes of the tensors live then.
std::size_t workspace_lower_bound(const std::vector<TensorLifetime>& tensors, std::size_t alignment = 256);

}  // namespace redwood::memory
