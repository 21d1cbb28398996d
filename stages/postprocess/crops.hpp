#pragma once
// Cutting a frame's detections out of its picture for a secondary model (a classifier, an
// embedding): which detections (kind, label, size, the best scored), the region around each box
// (padding, aspect), and one [K, 3, H, W] float tensor of the regions, normalized as the
// preprocess stage normalizes a picture (stages/preprocess/image_tensor.hpp).

#include "core/tensor.hpp"
#include "stages/frame.hpp"
#include "stages/frame_memory.hpp"
#include "stages/geometry.hpp"

#include <opencv2/core.hpp>

#include <array>
#include <set>
#include <string>
#include <vector>

namespace redwood {

/// How a region of another shape than W x H fills the crop.
enum class CropAspect {
  kStretch,  // the region resized to W x H (proportions change)
  kPad,      // resized to fit, proportions kept, centred; the rest black (pixel value 0)
  kExpand,   // the region grown around its centre to W:H before cutting, then resized
};

/// Which detections are cut.
struct CropSelection {
  std::set<std::string> kinds;    // Detection::kind; empty: every kind
  std::set<std::string> classes;  // Detection::label; empty: every label
  float min_size = 16.f;          // boxes narrower or shorter than this (pixels) are skipped
  int max_crops = 32;             // the highest scores, when more qualify
};

struct CropOptions {
  int width = 0, height = 0;  // the crop's size, the model's input
  float padding = 0.f;        // fraction of the box's width (height) added on the left and right (top and bottom)
  CropAspect aspect = CropAspect::kStretch;
  bool rgb = true;                           // channel order the model wants
  float scale = 1.0f / 255.0f;               // (p * scale - mean) / std, per channel
  std::array<float, 3> mean{0.f, 0.f, 0.f};
  std::array<float, 3> std{1.f, 1.f, 1.f};
};

/// The indices in `detections` to cut, in detection order: those of the kinds and labels asked
/// for, at least min_size on both sides, overlapping the picture (width x height); of more than
/// max_crops, the best scored (the earlier of equal scores).
std::vector<int> select_crops(const std::vector<Detection>& detections, const CropSelection& selection, int width, int height);

/// The region of the picture a box is cut from: grown by `padding` on each side, then (expand)
/// around its centre to the crop's proportions. May reach outside the picture.
RectF crop_region(const RectF& box, const CropOptions& options);

/// [K, 3, height, width] float tensor of the regions of an 8-bit BGR picture, K = regions.size()
/// (0 gives a tensor of 0 rows). A region is cut at whole pixels (its edges rounded); where it
/// reaches outside the picture, the picture's edge pixels are repeated (OpenCV's
/// BORDER_REPLICATE). With `memory`, the tensor and the intermediate pictures come from that pool.
Tensor crops_to_batch(const cv::Mat& bgr, const std::vector<RectF>& regions, const CropOptions& options,
                      FrameMemory* memory = nullptr);

}  // namespace redwood
