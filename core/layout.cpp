#include "core/layout.hpp"

#include "core/error.hpp"

namespace redwood {

Tensor to_channels_last(const Tensor& t, std::int64_t channels, DType to) {
  RW_EXPECTS(t.shape().size() == 4 && is_floating(t.dtype()), InvalidArgument,
             "to_channels_last takes a 4-D floating tensor, not {}", t.description());
  const Tensor in = t.cast(DType::kF32).contiguous();
  const Shape& s = in.shape();
  const std::int64_t n = s[0], c = s[1], hw = s[2] * s[3];
  RW_EXPECTS(channels >= c, InvalidArgument, "to_channels_last: {} channels for a tensor of {}", channels, c);
  Tensor out = Tensor::zeros(DType::kF32, {n, s[2], s[3], channels});
  const float* src = in.data<float>();
  float* dst = out.data<float>();
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t ch = 0; ch < c; ++ch)
      for (std::int64_t p = 0; p < hw; ++p) dst[(b * hw + p) * channels + ch] = src[(b * c + ch) * hw + p];
  return to == DType::kF32 ? out : out.cast(to);
}

Tensor to_channels_first(const Tensor& t, std::int64_t channels) {
  RW_EXPECTS(t.shape().size() == 4 && is_floating(t.dtype()), InvalidArgument,
             "to_channels_first takes a 4-D floating tensor, not {}", t.description());
  const Tensor in = t.cast(DType::kF32).contiguous();
  const Shape& s = in.shape();
  const std::int64_t n = s[0], hw = s[1] * s[2], cp = s[3];
  RW_EXPECTS(channels <= cp, InvalidArgument, "to_channels_first: {} channels of a tensor of {}", channels, cp);
  Tensor out = Tensor::empty(DType::kF32, {n, channels, s[1], s[2]});
  const float* src = in.data<float>();
  float* dst = out.data<float>();
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t ch = 0; ch < channels; ++ch)
      for (std::int64_t p = 0; p < hw; ++p) dst[(b * channels + ch) * hw + p] = src[(b * hw + p) * cp + ch];
  return out;
}

}  // namespace redwood
