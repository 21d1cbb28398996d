#include "core/graph/topological_order.hpp"

#include <algorithm>
#include <functional>
#include <queue>

namespace redwood {

namespace {

// Some cycle among the nodes that Kahn's algorithm left behind. Each of them reads at least one
// other left-behind node (otherwise it would have become ready), so walking from one to a
// left-behind producer, and on, must come back to a node already walked.
std::vector<std::size_t> find_cycle(const std::vector<std::vector<std::size_t>>& needs,
                                    const std::vector<bool>& placed) {
  const auto start = static_cast<std::size_t>(std::find(placed.begin(), placed.end(), false) - placed.begin());
  std::vector<std::size_t> walk;
  std::vector<std::size_t> step_of(needs.size(), needs.size());
  std::size_t at = start;
  while (step_of[at] == needs.size()) {
    step_of[at] = walk.size();
    walk.push_back(at);
    at = *std::find_if(needs[at].begin(), needs[at].end(), [&](std::size_t p) { return !placed[p]; });
  }
  // walk[k] reads walk[k + 1]; the cycle is the walk from `at` on, read backwards.
  std::vector<std::size_t> cycle(walk.rbegin(), walk.rend() - static_cast<std::ptrdiff_t>(step_of[at]));
  std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
  return cycle;
}

}  // namespace

TopologicalOrder topological_order(const std::vector<std::vector<std::size_t>>& needs) {
  const std::size_t n = needs.size();
  std::vector<std::size_t> pending(n, 0);
  std::vector<std::vector<std::size_t>> consumers(n);
  for (std::size_t i = 0; i < n; ++i) {
    pending[i] = needs[i].size();
    for (std::size_t p : needs[i]) consumers[p].push_back(i);
  }
  // Kahn's algorithm, taking the lowest position among the ready nodes (a min-heap).
  std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready;
  for (std::size_t i = 0; i < n; ++i) {
    if (pending[i] == 0) ready.push(i);
  }
  TopologicalOrder result;
  result.order.reserve(n);
  std::vector<bool> placed(n, false);
  while (!ready.empty()) {
    const std::size_t i = ready.top();
    ready.pop();
    placed[i] = true;
    result.order.push_back(i);
    for (std::size_t c : consumers[i]) {
      if (--pending[c] == 0) ready.push(c);
    }
  }
  if (result.order.size() != n) {
    result.order.clear();
    result.cycle = find_cycle(needs, placed);
  }
  return result;
}

}  // namespace redwood
