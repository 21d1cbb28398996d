#include "backends/cuda/passes/space_to_depth.hpp"

#include "core/error.hpp"

namespace redwood {
namespace {

struct Axis {
  std::int64_t taps, shift, begin, end;
};

// One spatial axis of the header's algebra; nullopt where it does not hold.
std::optional<Axis> plan_axis(std::int64_t n, std::int64_t k, std::int64_t p_begin, std::int64_t p_end) {
  if (n <= 0 || k <= 0 || p_begin < 0 || p_end < 0 || n + p_begin + p_end < k) return std::nullopt;
  const std::int64_t out = (n + p_begin + p_end - k) / 2 + 1;
  const std::int64_t shift = p_begin % 2;
  const std::int64_t taps = (k + shift + 1) / 2;
  const std::int64_t begin = (p_begin + shift) / 2;
  const std::int64_t end = out + taps - 1 - begin - (n + 1) / 2;
  if (end < 0) return std::nullopt;
  return Axis{taps, shift, begin, end};
}

}  // namespace

std::optional<SpaceToDepthConv> plan_space_to_depth_conv(std::int64_t h, std::int64_t w, std::int64_t r, std::int64_t s,
                                                         const std::array<std::int64_t, 4>& pads) {
  const auto y = plan_axis(h, r, pads[0], pads[2]);
  const auto x = plan_axis(w, s, pads[1], pads[3]);
  if (!y || !x) return std::nullopt;
  SpaceToDepthConv p;
  p.kernel_h = y->taps;
  p.kernel_w = x->taps;
  p.shift_h = y->shift;
  p.shift_w = x->shift;
  p.pads = {y->begin, x->begin, y->end, x->end};
  return p;
}

Tensor space_to_depth_weights(const Tensor& w, const SpaceToDepthConv& plan) {
  RW_EXPECTS(w.shape().size() == 4 && is_floating(w.dtype()), InvalidArgument,
             "space_to_depth_weights takes [K, C, R, S] weights, not {}", w.description());
  const Tensor in = w.cast(DType::kF32).contiguous();
  const std::int64_t k = in.shape()[0], c = in.shape()[1], r = in.shape()[2], s = in.shape()[3];
  const std::int64_t kh = plan.kernel_h, kw = plan.kernel_w;
  Tensor out = Tensor::zeros(DType::kF32, {k, 4 * c, kh, kw});
  const float* src = in.data<float>();
  float* dst = out.data<float>();
  for (std::int64_t o = 0; o < k; ++o)
    for (std::int64_t dy = 0; dy < 2; ++dy)
      for (std::int64_t dx = 0; dx < 2; ++dx)
        for (std::int64_t ch = 0; ch < c; ++ch)
          for (std::int64_t jy = 0; jy < kh; ++jy)
            for (std::int64_t jx = 0; jx < kw; ++jx) {
              const std::int64_t ty = 2 * jy + dy - plan.shift_h, tx = 2 * jx + dx - plan.shift_w;
              if (ty < 0 || ty >= r || tx < 0 || tx >= s) continue;
              const std::int64_t cp = (dy * 2 + dx) * c + ch;
              dst[((o * 4 * c + cp) * kh + jy) * kw + jx] = src[((o * c + ch) * r + ty) * s + tx];
            }
  return out;
}

}  // namespace redwood
