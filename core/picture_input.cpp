#include "core/picture_input.hpp"

#include "core/error.hpp"

#include <cstddef>

namespace redwood {

PictureInput PictureInput::from_mean_std(float scale, const std::array<float, 3>& mean, const std::array<float, 3>& std,
                                         int channels, bool nchw) {
  PictureInput p;
  p.channels = channels;
  p.nchw = nchw;
  for (int c = 0; c < 3; ++c) {
    p.alpha[c] = scale / std[c];
    p.beta[c] = -mean[c] / std[c];
  }
  return p;
}

Shape picture_model_shape(const Shape& pixels, const PictureInput& picture) {
  RW_EXPECTS(pixels.size() == 4 && pixels[3] == picture.channels, InvalidArgument,
             "pixels of shape {} for a picture input of {} channel(s): expected [rows, H, W, {}]", shape_str(pixels),
             picture.channels, picture.channels);
  return picture.nchw ? Shape{pixels[0], pixels[3], pixels[1], pixels[2]} : pixels;
}

std::string picture_mismatch(const ValueInfo& input, const PictureInput& picture, std::int64_t height,
                             std::int64_t width) {
  if (input.dtype != DType::kF32 && input.dtype != DType::kUndefined) return "a picture feeds float inputs only";
  if (!input.has_shape) return "";
  if (input.dims.size() != 4) return "a picture feeds a rank-4 input";
  const Dim& c = input.dims[picture.nchw ? 1 : 3];
  const Dim& h = input.dims[picture.nchw ? 2 : 1];
  const Dim& w = input.dims[picture.nchw ? 3 : 2];
  const char* layout = picture.nchw ? "NCHW" : "NHWC";
  if (c.known() && c.value != picture.channels) {
    return fmt::format("{} channel(s) in the picture, {} in the input ({})", picture.channels, c.value, layout);
  }
  if (h.known() && height >= 0 && h.value != height) {
    return fmt::format("the picture is {} tall, the input {} ({})", height, h.value, layout);
  }
  if (w.known() && width >= 0 && w.value != width) {
    return fmt::format("the picture is {} wide, the input {} ({})", width, w.value, layout);
  }
  return "";
}

void normalize_picture(const std::uint8_t* pixels, std::int64_t rows, std::int64_t height, std::int64_t width,
                       const PictureInput& picture, float* dst) {
  // The product and the sum are rounded apart (no fused multiply-add on baseline x86-64), as the
  // CUDA kernel does with __fmul_rn/__fadd_rn, so that both devices give the same bits.
  const std::size_t plane = static_cast<std::size_t>(height) * static_cast<std::size_t>(width);
  const int channels = picture.channels;
  RW_EXPECTS(channels == 1 || channels == 3, InvalidArgument, "a picture has 3 channels or 1, not {}", channels);
  const float* alpha = picture.alpha.data();
  const float* beta = picture.beta.data();
  if (!picture.nchw || channels == 1) {
    // Interleaved in, interleaved out: one multiply-add per value, the channel cycling.
    const std::size_t n = static_cast<std::size_t>(rows) * plane;
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint8_t* __restrict p = pixels + i * channels;
      float* __restrict out = dst + i * channels;
      for (int c = 0; c < channels; ++c) out[c] = static_cast<float>(p[c]) * alpha[c] + beta[c];
    }
    return;
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::uint8_t* __restrict p = pixels + static_cast<std::size_t>(r) * plane * 3;
    float* __restrict out0 = dst + static_cast<std::size_t>(r) * plane * 3;
    float* __restrict out1 = out0 + plane;
    float* __restrict out2 = out1 + plane;
    for (std::size_t i = 0; i < plane; ++i) {
      out0[i] = static_cast<float>(p[3 * i]) * alpha[0] + beta[0];
      out1[i] = static_cast<float>(p[3 * i + 1]) * alpha[1] + beta[1];
      out2[i] = static_cast<float>(p[3 * i + 2]) * alpha[2] + beta[2];
    }
  }
}

}  // namespace redwood
