#pragma once
// Turning a picture into a model input: read an image or a video's first frame, resize it to
// the input's fixed extents (dynamic ones keep the picture's size), convert BGR to RGB, scale and
// normalize, and lay it out as NCHW or NHWC. The pipeline's preprocess stage builds on this.

#include "core/graph/graph.hpp"
#include "core/tensor.hpp"
#include "stages/frame.hpp"
#include "stages/frame_memory.hpp"

#include <opencv2/core.hpp>

#include <array>
#include <filesystem>

namespace redwood {

enum class ImageLayout { kAuto, kNCHW, kNHWC };
/// Stretch fills the tensor (aspect ratio changes); letterbox keeps the aspect ratio and pads
/// the rest, centred, with pad_value.
enum class ResizeMode { kStretch, kLetterbox };

struct ImageTensorOptions {
  ImageLayout layout = ImageLayout::kAuto;  // kAuto: NHWC when the last dim is 3, else NCHW
  bool rgb = true;                          // channel order the model wants
  float scale = 1.0f / 255.0f;              // applied to 0..255 pixel values first
  std::array<float, 3> mean{0.f, 0.f, 0.f}; // then (x - mean) / std, per channel
  std::array<float, 3> std{1.f, 1.f, 1.f};
  int width = 0;   // > 0: size for dynamic extents (fixed extents always win); else the picture's
  int height = 0;
  ResizeMode resize = ResizeMode::kStretch;
  float pad_value = 0.f;  // letterbox padding, in 0..255 pixel units (before scale/mean/std)
};

/// Reads a still image (PNG, JPEG, ...) or the first frame of a video file as 8-bit BGR.
/// Throws IoError naming the file when it is missing, unreadable, or a video with no frame.
cv::Mat read_image_or_first_frame(const std::filesystem::path& file);

/// Makes a float tensor of the shape `input` declares from a BGR image. The input must be
/// rank 4 with 3 channels (or 1: the picture is then converted to grey).
Tensor image_to_tensor(const cv::Mat& bgr, const ValueInfo& input, const ImageTensorOptions& options);
/// The same, also saying how picture coordinates map into the tensor (for boxes found in it);
/// with `memory`, the tensor and the intermediate pictures come from that pool.
Tensor image_to_tensor(const cv::Mat& bgr, const ValueInfo& input, const ImageTensorOptions& options,
                       ImageTransform* transform, FrameMemory* memory = nullptr);

/// Writes 8-bit pixels (`channels` interleaved, continuous rows or not) as floats
/// (p * scale - mean[c]) / std[c] into `dst`: planes of height x width (NCHW), or interleaved
/// (NHWC). The inner loop of image_to_tensor and of text crops.
void write_normalized(const cv::Mat& pixels, int channels, float scale, const float* mean, const float* std, bool nchw,
                      float* dst);

}  // namespace redwood
