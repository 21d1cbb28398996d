#include "backends/cpu/reference/space_to_depth.hpp"

#include "core/error.hpp"

namespace redwood {

Tensor space_to_depth(const Tensor& x) {
  RW_EXPECTS(x.shape().size() == 4 && is_floating(x.dtype()), InvalidArgument,
             "space_to_depth takes an [N, C, H, W] tensor, not {}", x.description());
  const Tensor in = x.cast(DType::kF32).contiguous();
  const std::int64_t n = in.shape()[0], c = in.shape()[1], h = in.shape()[2], w = in.shape()[3];
  const std::int64_t oh = (h + 1) / 2, ow = (w + 1) / 2;
  Tensor out = Tensor::zeros(DType::kF32, {n, 4 * c, oh, ow});
  const float* src = in.data<float>();
  float* dst = out.data<float>();
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t dy = 0; dy < 2; ++dy)
      for (std::int64_t dx = 0; dx < 2; ++dx)
        for (std::int64_t ch = 0; ch < c; ++ch)
          for (std::int64_t y = 0; y < oh; ++y)
            for (std::int64_t xx = 0; xx < ow; ++xx) {
              const std::int64_t iy = 2 * y + dy, ix = 2 * xx + dx;
              if (iy >= h || ix >= w) continue;
              dst[((b * 4 * c + (dy * 2 + dx) * c + ch) * oh + y) * ow + xx] = src[((b * c + ch) * h + iy) * w + ix];
            }
  return out;
}

}  // namespace redwood
