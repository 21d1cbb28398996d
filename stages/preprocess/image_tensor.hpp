#pragma once
// Turning a picture into a model input: read an image or a video's first frame, resize it to
// the input's fixed extents (dynamic ones keep the picture's size), convert BGR to RGB, scale and
// normalize, and lay it out as NCHW or NHWC. The pipeline's preprocess stage builds on this.
// image_to_pixels stops before the normalization and leaves it to the model's runner
// (core/picture_input.hpp): the same picture, as 8-bit pixels.

#include "core/graph/graph.hpp"
#include "core/picture_input.hpp"
#include "core/tensor.hpp"
#include "stages/frame.hpp"
#include "stages/frame_memory.hpp"

#include <opencv2/core.hpp>

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>

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

/// The most pixels a picture made for a model input may have: OpenCV's own limit on a decoded
/// image (OPENCV_IO_MAX_IMAGE_PIXELS' default, 2^30).
inline constexpr std::int64_t kMaxPicturePixels = std::int64_t{1} << 30;

/// Decodes a still picture's file bytes as 8-bit BGR, as cv::imread reads a file: PNG, JPEG,
/// BMP, TIFF, WebP, PBM/PGM/PPM (by their first bytes); empty for anything else, the other formats
/// OpenCV decodes included (DICOM, JPEG 2000, OpenEXR...). A picture OpenCV refuses (a header past
/// its size limits, OPENCV_IO_MAX_IMAGE_PIXELS and the like) is an IoError naming `source`, where
/// OpenCV throws its own exception.
cv::Mat decode_image(const cv::Mat& bytes, const std::string& source);
/// The same for a file (cv::imread): empty when it is not a picture OpenCV reads.
cv::Mat read_image(const std::filesystem::path& file);

/// Reads a still image (PNG, JPEG, ...) or the first frame of a video file as 8-bit BGR.
/// Throws IoError naming the file when it is missing, unreadable, or a video with no frame.
cv::Mat read_image_or_first_frame(const std::filesystem::path& file);

/// How a picture fits a model input: the layout, the channels (3, or 1: grey) and the extents it
/// is resized to (the input's fixed ones, else the options' width and height, else the picture's).
struct PictureFit {
  bool nchw = true;
  int channels = 3;
  int height = 0, width = 0;
};
/// Checks the picture and the input as image_to_tensor does (the same errors) and says how one
/// fits the other.
PictureFit fit_picture(const cv::Mat& bgr, const ValueInfo& input, const ImageTensorOptions& options);
/// The normalization image_to_tensor applies to a picture of this fit, for a runner to apply to
/// image_to_pixels' output: the same values.
PictureInput picture_input(const PictureFit& fit, const ImageTensorOptions& options);

/// Makes a float tensor of the shape `input` declares from a BGR image. The input must be
/// rank 4 with 3 channels (or 1: the picture is then converted to grey), its fixed height and
/// width from 1 to kMaxPicturePixels, and at most kMaxPicturePixels in all.
Tensor image_to_tensor(const cv::Mat& bgr, const ValueInfo& input, const ImageTensorOptions& options);
/// The same, also saying how picture coordinates map into the tensor (for boxes found in it);
/// with `memory`, the tensor comes from that pool. The intermediate pictures (resized, reordered)
/// live in buffers of the calling thread that only grow: once the largest has been seen, only
/// the tensor is new.
Tensor image_to_tensor(const cv::Mat& bgr, const ValueInfo& input, const ImageTensorOptions& options,
                       ImageTransform* transform, FrameMemory* memory = nullptr);

/// image_to_tensor's picture before it is normalized: resized the same way and in the model's
/// channel order, as 8-bit pixels [1, H, W, C] (C interleaved) for the model's runner to normalize
/// with picture_input(). The same checks, transform and pool as image_to_tensor.
Tensor image_to_pixels(const cv::Mat& bgr, const ValueInfo& input, const ImageTensorOptions& options,
                       ImageTransform* transform = nullptr, FrameMemory* memory = nullptr);

/// Writes 8-bit pixels (`channels` interleaved, continuous rows or not) as floats
/// (p * scale - mean[c]) / std[c] into `dst`: planes of height x width (NCHW), or interleaved
/// (NHWC). The inner loop of image_to_tensor: the same values as core's normalize_picture, to a
/// rounding (OpenCV's conversion may fuse the multiply-add).
void write_normalized(const cv::Mat& pixels, int channels, float scale, const float* mean, const float* std, bool nchw,
                      float* dst);

}  // namespace redwood
