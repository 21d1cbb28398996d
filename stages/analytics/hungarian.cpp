// The limit becomes part of a square problem, as lap.lapjv's extend_cost does: the n x m costs
// are padded to (n + m) x (n + m), a row's "stay unassigned" column and a column's "stay
// unassigned" row cost limit / 2 each, dummy with dummy costs 0. Assigning (i, j) then costs
// c(i, j) instead of limit, so it is taken exactly when it saves something. Pairs at or above the
// limit (forbidden ones among them) are dropped from the answer.

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

}  // namespace

Assignment assign_min_cost(const CostMatrix& costs, double cost_limit) {
  Assignment out;
  const int n = costs.rows, m = costs.cols;
  if (n == 0 || m == 0) {
    for (int i = 0; i < n; ++i) out.unmatched_rows.push_back(i);
    for (int j = 0; j < m; ++j) out.unmatched_cols.push_back(j);
    return out;
  }
  // A pair at or above the limit is never worth taking; clamping it to the limit (plus a margin)
  // keeps the square problem finite without changing which pairs pay.
  const double cap = cost_limit + 1.0 + std::abs(cost_limit);
  const int size = n + m;
  std::vector<double> a(static_cast<std::size_t>(size) * size, 0.0);
  for (int i = 0; i < size; ++i) {
    for (int j = 0; j < size; ++j) {
      double c = 0.0;
      if (i < n && j < m) {
        c = costs.at(i, j);
        if (!(c < cost_limit)) c = cap;  // NaN and infinity too
      } else if (i < n || j < m) {
        c = cost_limit / 2;
      }
      a[static_cast<std::size_t>(i) * size + j] = c;
    }
  }
  const std::vector<int> column_of = solve_square(a, size);
  std::vector<char> col_taken(m, 0);
  for (int i = 0; i < n; ++i) {
    const int j = column_of[i];
    if (j >= 0 && j < m && costs.at(i, j) < cost_limit) {
      out.matches.emplace_back(i, j);
      col_taken[j] = 1;
    } else {
      out.unmatched_rows.push_back(i);
    }
  }
  for (int j = 0; j < m; ++j) {
    if (!col_taken[j]) out.unmatched_cols.push_back(j);
  }
  return out;
}

}  // namespace redwood
