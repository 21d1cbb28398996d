#pragma once
// PictureInput: a model input that travels as the 8-bit picture and is normalized by the runner
// that runs the model, rather than by the preprocess stage on the host:
//
//   preprocess (host)             infer stage           runner (the model's device)
//   resize, colour order ──u8──►  batches the rows ──►  copy the pixels in (a quarter of the
//   [1, H, W, C] interleaved      [rows, H, W, C]       float bytes), then alpha[c]*p + beta[c]
//                                                       into the model's float input, NCHW or NHWC
//
// On a GPU this takes the per-value conversion off the host's cores (the bottleneck of many
// streams) and cuts the bytes copied to the device by four. normalize_picture() is what every
// runner computes, bit for bit: the CPU runner calls it, and the CUDA kernel
// (backends/cuda/kernels/data/picture_normalize.cu) rounds the product and the sum apart as it does.

#include "core/graph/graph.hpp"
#include "core/shape.hpp"

#include <array>
#include <cstdint>
#include <string>

namespace redwood {

/// How 8-bit pixels become a model's float input: the input's parts arrive as pixels
/// [rows, H, W, C] interleaved (C = channels, already in the model's channel order); the runner
/// writes alpha[c] * p + beta[c] into the model's float input, NCHW (planes) or NHWC.
struct PictureInput {
  std::array<float, 3> alpha{1.f, 1.f, 1.f};
  std::array<float, 3> beta{0.f, 0.f, 0.f};
  int channels = 3;  // 3, or 1 (grey)
  bool nchw = true;  // the model's layout

  /// (p * scale - mean[c]) / std[c] as one multiply and one add per value.
  static PictureInput from_mean_std(float scale, const std::array<float, 3>& mean, const std::array<float, 3>& std,
                                    int channels, bool nchw);
  bool operator==(const PictureInput&) const = default;
};

/// The model's input shape for pixels of shape [rows, H, W, C]: [rows, C, H, W] when nchw, else
/// the same. Throws InvalidArgument when `pixels` is not rank 4 with `picture.channels` channels.
Shape picture_model_shape(const Shape& pixels, const PictureInput& picture);

/// Why pixels of height x width x picture.channels cannot feed `input` (not a float input of
/// rank 4, or an extent it fixes differs, read in the picture's layout); "" when they can. A
/// negative height or width is one not known yet, which fits any.
std::string picture_mismatch(const ValueInfo& input, const PictureInput& picture, std::int64_t height,
                             std::int64_t width);

/// Writes `rows` pictures of height x width x picture.channels interleaved 8-bit pixels
/// (contiguous) as floats alpha[c] * p + beta[c] into `dst`, in the picture's layout: the
/// reference of every runner's normalization.
void normalize_picture(const std::uint8_t* pixels, std::int64_t rows, std::int64_t height, std::int64_t width,
                       const PictureInput& picture, float* dst);

}  // namespace redwood
