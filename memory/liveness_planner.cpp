#include "memory/liveness_planner.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <numeric>
#include <utility>

namespace redwood::memory {
namespace {

std::size_t align_up(std::size_t v, std::size_t a) { return (v + a - 1) & ~(a - 1); }

void check_input(const std::vector<TensorLifetime>& tensors, std::size_t alignment) {
  RW_EXPECTS(alignment != 0 && (alignment & (alignment - 1)) == 0, InvalidArgument,
             "liveness planner: alignment {} is not a power of two", alignment);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    RW_EXPECTS(tensors[i].last_step >= tensors[i].first_step, InvalidArgument,
               "liveness planner: tensor {} ends at step {} before it starts at step {}", i,
               tensors[i].last_step, tensors[i].first_step);
  }
}

}  // namespace

std::size_t workspace_lower_bound(const std::vector<TensorLifetime>& tensors, std::size_t alignment) {
  check_input(tensors, alignment);
  // Sweep: +bytes at first_step, -bytes after last_step; starts sort before ends at a step.
  std::vector<std::pair<std::int64_t, std::int64_t>> events;  // (step * 2 + is_end, delta)
  events.reserve(tensors.size() * 2);
  for (const auto& t : tensors) {
    const auto b = static_cast<std::int64_t>(align_up(t.bytes, alignment));
    if (b == 0) continue;
    events.emplace_back(t.first_step * 2, b);
    events.emplace_back((t.last_step + 1) * 2 - 1, -b);  // just before step last+1 starts
  }
  std::sort(events.begin(), events.end());
  std::int64_t live = 0, peak = 0;
  for (const auto& [key, delta] : events) {
    live += delta;
    peak = std::max(peak, live);
  }
  return static_cast<std::size_t>(peak);
}

namespace {

/// Greedy placement in the given order: each tensor at the best-fitting gap among the already
/// placed tensors whose lifetimes intersect its own (else after them).
WorkspacePlan place_in_order(const std::vector<TensorLifetime>& tensors, std::size_t alignment,
                             const std::vector<std::size_t>& order) {
  WorkspacePlan plan;
  plan.offsets.assign(tensors.size(), 0);
  std::vector<std::size_t> placed;
  std::vector<std::pair<std::size_t, std::size_t>> busy;  // [begin, end) of overlapping tensors
  for (std::size_t i : order) {
    const auto& t = tensors[i];
    const std::size_t size = align_up(t.bytes, alignment);
    if (size == 0) continue;
    busy.clear();
    for (std::size_t j : placed) {
      const auto& u = tensors[j];
      if (u.first_step <= t.last_step && t.first_step <= u.last_step)
        busy.emplace_back(plan.offsets[j], plan.offsets[j] + align_up(u.bytes, alignment));
    }
    std::sort(busy.begin(), busy.end());
    // Best fit: the smallest gap that holds it; else the end of the busy ranges.
    std::size_t cursor = 0, best = 0, best_gap = SIZE_MAX;
    for (const auto& [b, e] : busy) {
      if (b > cursor && b - cursor >= size && b - cursor < best_gap) {
        best = cursor;
        best_gap = b - cursor;
      }
      cursor = std::max(cursor, e);
    }
    const std::size_t offset = best_gap != SIZE_MAX ? best : cursor;
    plan.offsets[i] = offset;
    plan.workspace_bytes = std::max(plan.workspace_bytes, offset + size);
    placed.push_back(i);
  }
  return plan;
}

}  // namespace

WorkspacePlan plan_workspace(const std::vector<TensorLifetime>& tensors, std::size_t alignment) {
  check_input(tensors, alignment);
  // Three greedy orders, the smallest workspace wins: by size (largest first), by size times
  // lifetime (the tensors that block the most), and by first step (a sweep, which packs chains
  // of short-lived tensors well). Each is O(n^2); n is a few hundred for the shipped models.
  auto by = [&](auto key) {
    std::vector<std::size_t> order(tensors.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return key(a) > key(b); });
    return order;
  };
  auto span = [&](std::size_t i) { return tensors[i].last_step - tensors[i].first_step + 1; };
  const std::vector<std::size_t> orders[] = {
      by([&](std::size_t i) { return std::make_pair(tensors[i].bytes, span(i)); }),
      by([&](std::size_t i) { return static_cast<double>(tensors[i].bytes) * static_cast<double>(span(i)); }),
      by([&](std::size_t i) { return std::make_pair(-tensors[i].first_step, tensors[i].bytes); }),
  };
  WorkspacePlan best;
  for (const auto& order : orders) {
    WorkspacePlan plan = place_in_order(tensors, alignment, order);
    if (best.offsets.empty() || plan.workspace_bytes < best.workspace_bytes) best = std::move(plan);
  }
  best.offsets.resize(tensors.size());  // no tensors: an empty plan
  best.lower_bound = workspace_lower_bound(tensors, alignment);
  return best;
}

}  // namespace redwood::memory
