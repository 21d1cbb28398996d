#pragma once
// Minimum-cost assignment with a cost limit, as ByteTrack's linear_assignment (lap.lapjv with
// cost_limit): rows and columns may stay unassigned, and a pair is worth assigning only when its
// cost is below the limit. Exactly: among all partial matchings using pairs of cost < limit, the
// one with the least sum of (cost - limit), i.e. every pair saves (limit - cost) over leaving both
// alone. Forbidden pairs carry an infinite cost.

#include <limits>
#include <utility>
#include <vector>

namespace redwood {

/// A rows x cols cost matrix, row-major.
struct CostMatrix {
  int rows = 0, cols = 0;
  std::vector<double> cost;
  CostMatrix(int r, int c, double fill = 0.0) : rows(r), cols(c), cost(static_cast<std::size_t>(r) * c, fill) {}
  double& at(int r, int c) { return cost[static_cast<std::size_t>(r) * cols + c]; }
  double at(int r, int c) const { return cost[static_cast<std::size_t>(r) * cols + c]; }
};

inline constexpr double kForbidden = std::numeric_limits<double>::infinity();

struct Assignment {
  std::vector<std::pair<int, int>> matches;  // (row, col), by row
  std::vector<int> unmatched_rows, unmatched_cols;
};

/// The assignment described above (the Hungarian method on each connected part of the pairs
/// under the limit: cubic in the size of the largest part, not of the whole matrix).
Assignment assign_min_cost(const CostMatrix& costs, double cost_limit);

}  // namespace redwood
