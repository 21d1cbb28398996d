// The limit becomes part of a square problem, as lap.lapjv's extend_cost does: the n x m costs
// are padded to (n + m) x (n + m), a row's "stay unassigned" column and a column's "stay
// unassigned" row cost limit / 2 each, dummy with dummy costs 0. Assigning (i, j) then costs
// c(i, j) instead of limit, so it is taken exactly when it saves something. Pairs at or above the
// limit (forbidden ones among them) are dropped from the answer. The square problem is solved
// for each connected part of the pairs under the limit apart (assign_min_cost).

#include "stages/analytics/hungarian.hpp"

#include <algorithm>
#include <cmath>

namespace redwood {

namespace {

/// Shortest augmenting paths with potentials (Kuhn-Munkres, as in Jonker-Volgenant): a square
/// n x n matrix of finite costs -> the column of each row.
std::vector<int> solve_square(const std::vector<double>& a, int n) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // 1-based potentials u (rows), v (columns); p[j]: the row at column j; way: the path back.
  std::vector<double> u(n + 1, 0.0), v(n + 1, 0.0);
  std::vector<int> p(n + 1, 0), way(n + 1, 0);
  for (int i = 1; i <= n; ++i) {
    p[0] = i;
    int j0 = 0;
    std::vector<double> minv(n + 1, kInf);
    std::vector<char> used(n + 1, 0);
    do {
      used[j0] = 1;
      const int i0 = p[j0];
      double delta = kInf;
      int j1 = 0;
      for (int j = 1; j <= n; ++j) {
        if (used[j]) continue;
        const double cur = a[static_cast<std::size_t>(i0 - 1) * n + (j - 1)] - u[i0] - v[j];
        if (cur < minv[j]) {
          minv[j] = cur;
          way[j] = j0;
        }
        if (minv[j] < delta) {
          delta = minv[j];
          j1 = j;
        }
      }
      for (int j = 0; j <= n; ++j) {
        if (used[j]) {
          u[p[j]] += delta;
          v[j] -= delta;
        } else {
          minv[j] -= delta;
        }
      }
      j0 = j1;
    } while (p[j0] != 0);
    do {
      const int j1 = way[j0];
      p[j0] = p[j1];
      j0 = j1;
    } while (j0 != 0);
  }
  std::vector<int> column_of(n, -1);
  for (int j = 1; j <= n; ++j) {
    if (p[j] > 0) column_of[p[j] - 1] = j - 1;
  }
  return column_of;
}

/// One connected part of the problem (rows and columns linked by pairs under the limit), solved
/// as the padded square problem above; matches appended in the part's row order.
void solve_part(const CostMatrix& costs, double cost_limit, const std::vector<int>& rows, const std::vector<int>& cols,
                std::vector<std::pair<int, int>>& matches) {
  const int n = static_cast<int>(rows.size()), m = static_cast<int>(cols.size());
  // A pair at or above the limit is never worth taking; clamping it to the limit (plus a margin)
  // keeps the square problem finite without changing which pairs pay.
  const double cap = cost_limit + 1.0 + std::abs(cost_limit);
  const int size = n + m;
  std::vector<double> a(static_cast<std::size_t>(size) * size, 0.0);
  for (int i = 0; i < size; ++i) {
    for (int j = 0; j < size; ++j) {
      double c = 0.0;
      if (i < n && j < m) {
        c = costs.at(rows[i], cols[j]);
        if (!(c < cost_limit)) c = cap;  // NaN and infinity too
      } else if (i < n || j < m) {
        c = cost_limit / 2;
      }
      a[static_cast<std::size_t>(i) * size + j] = c;
    }
  }
  const std::vector<int> column_of = solve_square(a, size);
  for (int i = 0; i < n; ++i) {
    const int j = column_of[i];
    if (j >= 0 && j < m && costs.at(rows[i], cols[j]) < cost_limit) matches.emplace_back(rows[i], cols[j]);
  }
}

int find_root(std::vector<int>& parent, int x) {
  while (parent[x] != x) x = parent[x] = parent[parent[x]];
  return x;
}

}  // namespace

Assignment assign_min_cost(const CostMatrix& costs, double cost_limit) {
  const int n = costs.rows, m = costs.cols;
  // The problem falls apart into the connected parts of the graph of pairs under the limit (no
  // other pair is ever taken), each solved alone: a crowd's tracks and detections form many small
  // parts, and the cubic cost applies to each part, not to the whole.
  std::vector<int> parent(n + m);
  for (int k = 0; k < n + m; ++k) parent[k] = k;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < m; ++j) {
      if (costs.at(i, j) < cost_limit) parent[find_root(parent, i)] = find_root(parent, n + j);
    }
  }
  std::vector<std::vector<int>> part_rows(n + m), part_cols(n + m);
  for (int i = 0; i < n; ++i) part_rows[find_root(parent, i)].push_back(i);
  for (int j = 0; j < m; ++j) part_cols[find_root(parent, n + j)].push_back(j);
  std::vector<std::pair<int, int>> matches;
  for (int k = 0; k < n + m; ++k) {
    if (!part_rows[k].empty() && !part_cols[k].empty()) solve_part(costs, cost_limit, part_rows[k], part_cols[k], matches);
  }
  Assignment out;
  std::sort(matches.begin(), matches.end());
  std::vector<char> row_taken(n, 0), col_taken(m, 0);
  for (const auto& [i, j] : matches) row_taken[i] = col_taken[j] = 1;
  for (int i = 0; i < n; ++i) {
    if (!row_taken[i]) out.unmatched_rows.push_back(i);
  }
  for (int j = 0; j < m; ++j) {
    if (!col_taken[j]) out.unmatched_cols.push_back(j);
  }
  out.matches = std::move(matches);
  return out;
}

}  // namespace redwood
