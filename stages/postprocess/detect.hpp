#pragma once
// Detector decoding: the output tensors of the common detector families -> candidate boxes with a
// class and a score, in model-input pixels, before non-maximum suppression (nms.hpp). The detect
// stage (detect.cpp) picks the decoder by `format:`, then suppresses overlaps and maps the boxes
// back to the picture. Each decoder reads one frame's tensors (the batch dim already dropped).
//
//   format   tensors                                   box                          score
//   yolo_v5  [B, 5 + C]                                cx, cy, w, h                 objectness x class
//   yolo_v8  [4 + C, B] (or [B, 4 + C])                cx, cy, w, h                 class
//   ssd      boxes [B, 4], scores [B, C]               x1, y1, x2, y2, or offsets   class (C counts
//                                                      against priors (anchors)     the background)
//   detr     boxes [Q, 4], logits [Q, C + 1]           cx, cy, w, h normalized      softmax, last = none
//
// YOLO and DETR give each box its best class (as Ultralytics' and DETR's post-processing do);
// SSD gives each box every class above its threshold (as torchvision's and TensorFlow's SSD
// post-processing do: a box may be both "car" and "truck", NMS runs per class).

#include "stages/postprocess/nms.hpp"

#include <array>
#include <string>
#include <vector>

namespace redwood {

enum class BoxUnits { kPixels, kNormalized };                // of the model input
enum class ScoreActivation { kNone, kSigmoid, kSoftmax };   // applied to the score values first

struct DecodeOptions {
  /// The score a class needs, per class id (size = the tensor's classes). A class left out
  /// (`classes:`, the background) has +infinity.
  std::vector<float> thresholds;
  ScoreActivation activation = ScoreActivation::kNone;
  BoxUnits units = BoxUnits::kPixels;
  float input_width = 0, input_height = 0;  // the model input's size, for normalized units
};

/// yolo_v5: `data` [boxes, 5 + classes] row by row. Score: objectness x the best class score.
std::vector<ScoredBox> decode_yolo_v5(const float* data, int boxes, int classes, const DecodeOptions& options);

/// yolo_v8 / v11: `data` [4 + classes, boxes] when `channels_first` (Ultralytics' export), else
/// [boxes, 4 + classes]. Score: the best class score.
std::vector<ScoredBox> decode_yolo_v8(const float* data, int boxes, int classes, bool channels_first,
                                      const DecodeOptions& options);

/// A prior (anchor) box of an SSD-style detector, centre form, normalized to the model input.
struct Prior {
  float cx = 0, cy = 0, w = 0, h = 0;
};

/// How an SSD-style detector lays its priors out (UltraFace / RFB, RetinaFace, FaceBoxes): one
/// feature map per stride, cells row by row, on each cell one square prior per min size (in
/// input pixels), e.g. UltraFace RFB-320: steps [8, 16, 32, 64], min_sizes [[10, 16, 24],
/// [32, 48], [64, 96], [128, 192, 256]].
struct PriorSpec {
  std::vector<int> steps;
  std::vector<std::vector<float>> min_sizes;  // one list per step
  /// Where a cell's centre lies: true, (i + 0.5) / cells (UltraFace's exported priors: a partial
  /// last cell counts whole); false, (i + 0.5) * step / size (RetinaFace, SSD). They differ only
  /// where a step does not divide the input size.
  bool centers_on_cells = true;
  bool clip = true;  // clamp the priors to [0, 1], as UltraFace does
  std::array<float, 2> variances{0.1f, 0.2f};  // of the centre offsets and of the log sizes
};

/// The priors of `spec` for an input of width x height pixels: ceil(size / step) cells per axis.
std::vector<Prior> generate_priors(const PriorSpec& spec, int input_width, int input_height);

/// ssd: `boxes` [count, 4], `scores` [count, classes]. With no priors the boxes are decoded
/// corners x1, y1, x2, y2 (in options.units); with priors (one per box) they are offsets
/// dx, dy, dw, dh: centre = prior centre + d * variance0 * prior size, size = prior size *
/// exp(d * variance1), normalized. Softmax (options.activation) runs over all classes, the
/// background included; the background is left out by its threshold.
std::vector<ScoredBox> decode_ssd(const float* boxes, const float* scores, int count, int classes,
                                  const std::vector<Prior>& priors, std::array<float, 2> variances,
                                  const DecodeOptions& options);

/// detr: `boxes` [queries, 4] (cx, cy, w, h, normalized), `logits` [queries, classes + 1], the
/// last class meaning "no object". Softmax over all, then each query's best real class.
std::vector<ScoredBox> decode_detr(const float* boxes, const float* logits, int queries, int classes,
                                   const DecodeOptions& options);

}  // namespace redwood
