#include "stages/postprocess/nms.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

namespace redwood {

std::vector<std::size_t> batched_nms(std::span<const ScoredBox> candidates, const NmsOptions& options) {
  std::vector<std::size_t> order;
  order.reserve(candidates.size());
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (std::isfinite(candidates[i].score)) order.push_back(i);
  }
  // One sort; stable so that equal scores keep their order and results do not depend on the
  // standard library's sort.
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return candidates[a].score > candidates[b].score; });

  const auto limit = static_cast<std::size_t>(std::max(options.max_detections, 0));
  std::vector<std::size_t> kept;
  std::unordered_map<int, std::vector<RectF>> kept_by_class;  // the boxes a candidate must clear
  for (std::size_t i : order) {
    if (kept.size() >= limit) break;
    const ScoredBox& c = candidates[i];
    std::vector<RectF>& bucket = kept_by_class[options.class_agnostic ? 0 : c.class_id];
    const bool suppressed = std::any_of(bucket.begin(), bucket.end(),
                                        [&](const RectF& k) { return intersection_over_union(c.box, k) > options.iou_threshold; });
    if (suppressed) continue;
    bucket.push_back(c.box);
    kept.push_back(i);
  }
  return kept;
}

}  // namespace redwood
