#pragma once
// Class-aware greedy non-maximum suppression for detectors: candidates are visited once, best
// score first; a candidate is dropped when it overlaps (IoU above the threshold) a box already
// kept of its own class (of any class when class-agnostic). Per-class buckets of kept boxes make
// each comparison one against boxes that can suppress it, so a frame of many classes costs about
// sum over classes of (candidates x kept) instead of all pairs.

#include "stages/geometry.hpp"

#include <cstddef>
#include <span>
#include <vector>

namespace redwood {

/// A detector's candidate box (any coordinates, as long as all share them).
struct ScoredBox {
  RectF box;
  float score = 0.f;
  int class_id = 0;
};

struct NmsOptions {
  float iou_threshold = 0.45f;  // a candidate overlapping a kept box by more than this is dropped
  int max_detections = 300;     // at most this many kept (the best)
  bool class_agnostic = false;  // true: boxes of different classes suppress each other too
};

/// The indices into `candidates` of the boxes kept, best score first (equal scores: lower index
/// first). Non-finite scores are dropped.
std::vector<std::size_t> batched_nms(std::span<const ScoredBox> candidates, const NmsOptions& options);

}  // namespace redwood
