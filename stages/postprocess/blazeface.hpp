#pragma once
// BlazeFace decoding (MediaPipe's SSD anchors + TensorsToDetections): 896 anchors over two
// feature maps, box and 6 keypoint offsets relative to each anchor in input pixels, sigmoid
// scores, then non-maximum suppression.

#include "stages/geometry.hpp"

#include <vector>

namespace redwood {

struct Anchor {
  float cx, cy;  // normalized [0, 1]
};

/// MediaPipe's SSD anchors for BlazeFace: strides {8,16,16,16} for the 128 front model,
/// {16,32,32,32} for the 256 back model; 2 anchors per cell per layer, layers of equal stride
/// merged.
std::vector<Anchor> blazeface_anchors(int input_size);

struct FaceDetection {
  RectF box;                      // normalized [0, 1] of the model input
  std::vector<PointF> keypoints;  // 6, normalized
  float score = 0.f;
};

struct BlazeFaceOptions {
  float score_threshold = 0.75f;
  float iou_threshold = 0.3f;
  bool scores_are_logits = true;  // apply a sigmoid to the score output
};

/// Decodes scores [N] and boxes [N, 16] (raw model outputs) against `anchors`.
std::vector<FaceDetection> decode_blazeface(const float* scores, const float* boxes, const std::vector<Anchor>& anchors,
                                            int input_size, const BlazeFaceOptions& options);

/// Greedy NMS by IoU, highest score first.
std::vector<FaceDetection> non_max_suppression(std::vector<FaceDetection> detections, float iou_threshold);

}  // namespace redwood
