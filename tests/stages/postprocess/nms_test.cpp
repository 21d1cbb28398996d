// Class-aware greedy NMS: hand cases with known survivors, and random boxes against a
// brute-force greedy NMS written the obvious way (all pairs, no buckets).

#include "stages/postprocess/nms.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

namespace redwood {
namespace {

std::vector<std::size_t> brute_force_nms(const std::vector<ScoredBox>& c, const NmsOptions& o) {
  std::vector<std::size_t> order(c.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return c[a].score > c[b].score; });
  std::vector<bool> removed(c.size(), false);
  std::vector<std::size_t> kept;
  for (std::size_t n = 0; n < order.size(); ++n) {
    const std::size_t i = order[n];
    if (removed[i]) continue;
    kept.push_back(i);
    for (std::size_t m = n + 1; m < order.size(); ++m) {
      const std::size_t j = order[m];
      if ((o.class_agnostic || c[i].class_id == c[j].class_id) && intersection_over_union(c[i].box, c[j].box) > o.iou_threshold) {
        removed[j] = true;
      }
    }
  }
  if (kept.size() > static_cast<std::size_t>(o.max_detections)) kept.resize(static_cast<std::size_t>(o.max_detections));
  return kept;
}

TEST(Nms, IntersectionOverUnion) {
  EXPECT_FLOAT_EQ(intersection_over_union({0, 0, 10, 10}, {0, 0, 10, 10}), 1.f);
  EXPECT_FLOAT_EQ(intersection_over_union({0, 0, 10, 10}, {5, 0, 10, 10}), 50.f / 150.f);
  EXPECT_FLOAT_EQ(intersection_over_union({0, 0, 10, 10}, {10, 0, 10, 10}), 0.f);  // touching
  EXPECT_FLOAT_EQ(intersection_over_union({0, 0, 10, 10}, {2, 2, 0, 5}), 0.f);      // empty
}

TEST(Nms, OverlappingBoxesOfDifferentClassesBothSurvive) {
  const std::vector<ScoredBox> c = {{{0, 0, 10, 10}, 0.9f, 0}, {{1, 1, 10, 10}, 0.8f, 1}};
  EXPECT_EQ(batched_nms(c, {}), (std::vector<std::size_t>{0, 1}));
  NmsOptions agnostic;
  agnostic.class_agnostic = true;
  EXPECT_EQ(batched_nms(c, agnostic), (std::vector<std::size_t>{0}));
}

TEST(Nms, KeepsTheBestOfOverlappingBoxesOfOneClass) {
  // 1 overlaps 2 (IoU 0.68); 0 is apart; the order out is by score.
  const std::vector<ScoredBox> c = {{{100, 100, 20, 20}, 0.5f, 3}, {{0, 0, 10, 10}, 0.7f, 3}, {{1, 1, 10, 10}, 0.9f, 3}};
  EXPECT_EQ(batched_nms(c, {}), (std::vector<std::size_t>{2, 0}));
}

TEST(Nms, SuppressesOnlyAboveTheThreshold) {
  // IoU exactly 1/3: kept at threshold 1/3, dropped below it.
  const std::vector<ScoredBox> c = {{{0, 0, 10, 10}, 0.9f, 0}, {{5, 0, 10, 10}, 0.8f, 0}};
  NmsOptions o;
  o.iou_threshold = 0.34f;
  EXPECT_EQ(batched_nms(c, o).size(), 2u);
  o.iou_threshold = 0.33f;
  EXPECT_EQ(batched_nms(c, o).size(), 1u);
}

TEST(Nms, SuppressedBoxesDoNotSuppressOthers) {
  // A chain: 0 suppresses 1, and 1 would have suppressed 2, which survives.
  const std::vector<ScoredBox> c = {{{0, 0, 10, 10}, 0.9f, 0}, {{4, 0, 10, 10}, 0.8f, 0}, {{8, 0, 10, 10}, 0.7f, 0}};
  NmsOptions o;
  o.iou_threshold = 0.3f;
  EXPECT_EQ(batched_nms(c, o), (std::vector<std::size_t>{0, 2}));
}

TEST(Nms, MaxDetectionsKeepsTheBestAndNonFiniteScoresAreDropped) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<ScoredBox> c = {{{0, 0, 1, 1}, 0.1f, 0}, {{10, 0, 1, 1}, nan, 0}, {{20, 0, 1, 1}, 0.3f, 0}, {{30, 0, 1, 1}, 0.2f, 0}};
  NmsOptions o;
  EXPECT_EQ(batched_nms(c, o), (std::vector<std::size_t>{2, 3, 0}));
  o.max_detections = 2;
  EXPECT_EQ(batched_nms(c, o), (std::vector<std::size_t>{2, 3}));
  EXPECT_TRUE(batched_nms({}, o).empty());
}

TEST(Nms, MatchesBruteForceOnRandomBoxes) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> pos(0.f, 200.f), size(5.f, 80.f), score(0.f, 1.f);
  int compared = 0, suppressed = 0;
  for (int round = 0; round < 200; ++round) {
    const int n = 1 + round % 150;
    const int classes = 1 + round % 4;
    std::vector<ScoredBox> c;
    for (int i = 0; i < n; ++i) {
      // Scores in steps of 1/64 so that ties happen and their order is tested too.
      c.push_back({{pos(rng), pos(rng), size(rng), size(rng)}, std::round(score(rng) * 64) / 64, static_cast<int>(rng() % classes)});
    }
    NmsOptions o;
    o.iou_threshold = 0.2f + 0.1f * (round % 6);
    o.class_agnostic = round % 3 == 0;
    o.max_detections = round % 5 == 0 ? 7 : 300;
    const auto want = brute_force_nms(c, o);
    ASSERT_EQ(batched_nms(c, o), want) << "round " << round;
    ++compared;
    suppressed += n - static_cast<int>(want.size());
  }
  EXPECT_EQ(compared, 200);
  EXPECT_GT(suppressed, 1000);  // the random boxes overlap enough to exercise suppression
}

}  // namespace
}  // namespace redwood
