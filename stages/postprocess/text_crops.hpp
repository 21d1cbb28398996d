#pragma once
// Cutting text regions out of a picture for a recognizer: each quad is rectified by a
// perspective warp (vertical text turned upright), resized to a fixed height keeping its aspect
// ratio, normalized, and right-padded into one [K, 3, height, max_width] tensor.

#include "core/tensor.hpp"
#include "stages/frame_memory.hpp"
#include "stages/geometry.hpp"

#include <opencv2/core.hpp>

#include <span>
#include <vector>

namespace redwood {

struct TextCropOptions {
  int height = 48;
  int max_width = 320;
  bool rgb = false;    // PP-OCR recognizers take BGR
  float scale = 1.0f / 255.0f;
  float mean = 0.5f;   // (x * scale - mean) / std
  float std = 0.5f;
};

/// The content of the quad (4 corners, clockwise from top-left), warped upright (8-bit BGR);
/// with `memory`, in that pool.
cv::Mat rectify_quad(const cv::Mat& bgr, std::span<const PointF> quad, FrameMemory* memory = nullptr);

/// [K, 3, height, max_width] float tensor of the given crops (K may be 0); with `memory`, the
/// tensor and the resized crops come from that pool.
Tensor crops_to_tensor(const std::vector<cv::Mat>& crops, const TextCropOptions& options, FrameMemory* memory = nullptr);

}  // namespace redwood
