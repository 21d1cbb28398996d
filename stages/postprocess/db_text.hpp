#pragma once
// DB (Differentiable Binarization) text-detection decoding, as PP-OCR does it: threshold the
// probability map, take each connected region's minimum-area rectangle, keep it when the mean
// probability inside is high enough, and grow it ("unclip") by area * ratio / perimeter, since
// the network is trained on shrunk text kernels.

#include "stages/geometry.hpp"

#include <array>
#include <vector>

namespace redwood {

struct DbOptions {
  float threshold = 0.3f;      // pixel probability that counts as text
  float box_threshold = 0.6f;  // mean probability a region needs to be kept
  float unclip_ratio = 1.5f;
  float min_size = 3.f;        // shorter side, in map pixels, below which a region is noise
  int max_candidates = 1000;
};

struct TextQuad {
  std::array<PointF, 4> points;  // clockwise from top-left, map coordinates
  float score = 0.f;
};

/// Decodes one H x W probability map (row-major floats). Quads are sorted top to bottom, then
/// left to right.
std::vector<TextQuad> decode_db(const float* prob, int height, int width, const DbOptions& options);
/// The same into `quads` (cleared first): a vector kept across frames keeps its capacity.
void decode_db(const float* prob, int height, int width, const DbOptions& options, std::vector<TextQuad>& quads);

/// Orders 4 points clockwise from the top-left one.
std::array<PointF, 4> order_quad(std::array<PointF, 4> points);

}  // namespace redwood
