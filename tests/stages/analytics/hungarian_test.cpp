// The limited assignment against brute force (every partial matching of small random matrices,
// square and rectangular, with forbidden pairs), and the cases ByteTrack relies on.

#include "stages/analytics/hungarian.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <set>

namespace redwood {
namespace {

/// Sum of (cost - limit) over the matches: what assign_min_cost minimizes.
double objective(const CostMatrix& c, const Assignment& a, double limit) {
  double sum = 0;
  for (const auto& [i, j] : a.matches) sum += c.at(i, j) - limit;
  return sum;
}

double brute_force(const CostMatrix& c, double limit) {
  double best = 0;  // nothing matched
  std::vector<char> used(c.cols, 0);
  std::function<void(int, double)> go = [&](int row, double sum) {
    if (row == c.rows) {
      best = std::min(best, sum);
      return;
    }
    go(row + 1, sum);
    for (int j = 0; j < c.cols; ++j) {
      if (used[j] || !(c.at(row, j) < limit)) continue;
      used[j] = 1;
      go(row + 1, sum + c.at(row, j) - limit);
      used[j] = 0;
    }
  };
  go(0, 0.0);
  return best;
}

void expect_valid(const CostMatrix& c, const Assignment& a, double limit) {
  std::set<int> rows, cols;
  for (const auto& [i, j] : a.matches) {
    EXPECT_LT(c.at(i, j), limit);
    EXPECT_TRUE(rows.insert(i).second);
    EXPECT_TRUE(cols.insert(j).second);
  }
  for (int i : a.unmatched_rows) EXPECT_TRUE(rows.insert(i).second);
  for (int j : a.unmatched_cols) EXPECT_TRUE(cols.insert(j).second);
  EXPECT_EQ(static_cast<int>(rows.size()), c.rows);
  EXPECT_EQ(static_cast<int>(cols.size()), c.cols);
}

TEST(Hungarian, AgreesWithBruteForce) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> cost(0.0, 1.0);
  std::uniform_int_distribution<int> size(0, 6);
  int checked = 0, nonempty = 0;
  for (int trial = 0; trial < 400; ++trial) {
    CostMatrix c(size(rng), size(rng));
    for (double& v : c.cost) v = cost(rng) < 0.2 ? kForbidden : cost(rng);
    const double limit = trial % 4 == 0 ? 1.5 : 0.3 + 0.6 * cost(rng);
    const Assignment a = assign_min_cost(c, limit);
    expect_valid(c, a, limit);
    EXPECT_NEAR(objective(c, a, limit), brute_force(c, limit), 1e-9) << "trial " << trial << " " << c.rows << "x" << c.cols;
    ++checked;
    nonempty += !a.matches.empty();
  }
  EXPECT_EQ(checked, 400);
  EXPECT_GT(nonempty, 250);
}

TEST(Hungarian, SolvesSeparatePartsAsOne) {
  // Six random 3 x 4 blocks on the diagonal of an 18 x 24 matrix, rows and columns shuffled,
  // forbidden elsewhere: the answer is the sum of the blocks' answers.
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> cost(0.0, 1.0);
  std::vector<int> row_at(18), col_at(24);
  for (int i = 0; i < 18; ++i) row_at[i] = i;
  for (int j = 0; j < 24; ++j) col_at[j] = j;
  std::shuffle(row_at.begin(), row_at.end(), rng);
  std::shuffle(col_at.begin(), col_at.end(), rng);
  CostMatrix whole(18, 24, kForbidden);
  double expected = 0;
  for (int b = 0; b < 6; ++b) {
    CostMatrix block(3, 4);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) whole.at(row_at[3 * b + i], col_at[4 * b + j]) = block.at(i, j) = cost(rng);
    expected += brute_force(block, 0.6);
  }
  const Assignment a = assign_min_cost(whole, 0.6);
  expect_valid(whole, a, 0.6);
  EXPECT_NEAR(objective(whole, a, 0.6), expected, 1e-9);
  EXPECT_GE(a.matches.size(), 6u);
}

TEST(Hungarian, TakesTheCheaperWholeNotTheGreedyPair) {
  // Greedy would take (0,0) at 0.1 and leave row 1 with nothing under the limit.
  CostMatrix c(2, 2);
  c.at(0, 0) = 0.1, c.at(0, 1) = 0.2, c.at(1, 0) = 0.3, c.at(1, 1) = kForbidden;
  const Assignment a = assign_min_cost(c, 0.8);
  EXPECT_EQ(a.matches, (std::vector<std::pair<int, int>>{{0, 1}, {1, 0}}));
  EXPECT_TRUE(a.unmatched_rows.empty());
}

TEST(Hungarian, PairsAtTheLimitStayApart) {
  CostMatrix c(2, 3, 0.9);
  c.at(1, 2) = 0.5;
  const Assignment a = assign_min_cost(c, 0.8);
  EXPECT_EQ(a.matches, (std::vector<std::pair<int, int>>{{1, 2}}));
  EXPECT_EQ(a.unmatched_rows, std::vector<int>{0});
  EXPECT_EQ(a.unmatched_cols, (std::vector<int>{0, 1}));
  const Assignment none = assign_min_cost(CostMatrix(3, 0), 0.8);
  EXPECT_EQ(none.unmatched_rows, (std::vector<int>{0, 1, 2}));
}

}  // namespace
}  // namespace redwood
