// GridSample (ONNX opset 16, and opset 20 for 4-D inputs with its names linear and cubic):
// X [N, C, H, W] read at the locations of grid [N, Ho, Wo, 2] gives Y [N, C, Ho, Wo].
//
// grid holds (x, y) pairs normalized to [-1, 1]: -1 and 1 are the centres of the corner pixels
// with align_corners, their outer edges without:
//   x_in = (g + 1) / 2 * (W - 1)     align_corners
//   x_in = ((g + 1) * W - 1) / 2     otherwise
// A location outside [lo, hi] ([0, W - 1] with align_corners, else [-0.5, W - 0.5]) is, per
// padding_mode:
//   zeros       left as it is; the taps outside the image read 0
//   border      clamped to [0, W - 1]; taps outside read the edge pixel
//   reflection  reflected at lo and hi until inside; taps outside read the pixel reflected so
// mode bilinear weighs the 2 x 2 pixels around the location; nearest takes the pixel at the
// location rounded half to even (std::nearbyint, as PyTorch's 2-D grid_sample); bicubic weighs
// the 4 x 4 pixels around it with Keys' cubic kernel (a = -0.75). As in ONNX Runtime and the
// ONNX reference, the arithmetic is float and a location is clamped or reflected before its
// taps are taken in every mode (PyTorch's bicubic pads each tap instead); nearest rounds first.
// A NaN or infinite location reads 0.

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/nn_common.hpp"
#include "backends/cpu/reference/sampling.hpp"

#include <algorithm>
#include <cmath>

namespace redwood::cpu {
namespace {

enum class Mode { kBilinear, kNearest, kBicubic };
enum class Padding { kZeros, kBorder, kReflection };

// x reflected at lo and hi until it lies in [lo, hi] (lo when the range is empty).
float reflect(float x, float lo, float hi) {
  const float range = hi - lo;
  if (range <= 0.0f) return lo;
  if (x >= lo && x <= hi) return x;
  const bool below = x < lo;
  const double dx = below ? double(lo) - x : double(x) - hi;
  const double flips = std::floor(dx / range);
  const float r = static_cast<float>(dx - flips * range);
  const bool even = std::fmod(flips, 2.0) == 0.0;
  return std::clamp(below == even ? lo + r : hi - r, lo, hi);
}

// The pixels that one axis of a location reads and their weights (0 for a tap outside the image
// with zeros padding).
struct AxisTaps {
  std::int64_t index[4] = {0, 0, 0, 0};
  float weight[4] = {0, 0, 0, 0};
  int count = 0;
};

class GridSampleKernel final : public Kernel {
 public:
  GridSampleKernel(const Node& node, const KernelInfo& info) {
    const auto dtype = [&](std::size_t i) {
      return i < info.input_dtypes.size() ? info.input_dtypes[i] : DType::kUndefined;
    };
    expect_dtype(node, dtype(0), {DType::kF32}, "X");
    expect_dtype(node, dtype(1), {DType::kF32}, "grid");
    mode_ = attr_choice<Mode>(node, "mode", "bilinear",
                              {{"bilinear", Mode::kBilinear},
                               {"linear", Mode::kBilinear},
                               {"nearest", Mode::kNearest},
                               {"bicubic", Mode::kBicubic},
                               {"cubic", Mode::kBicubic}});
    padding_ = attr_choice<Padding>(node, "padding_mode", "zeros",
                                    {{"zeros", Padding::kZeros},
                                     {"border", Padding::kBorder},
                                     {"reflection", Padding::kReflection}});
    align_corners_ = node.attr_int("align_corners", 0) != 0;
    // Opset 20 samples volumes too; this kernel samples images.
    const ValueInfo* x = info.graph != nullptr && !node.inputs.empty()
                             ? info.graph->find_value(node.inputs[0])
                             : nullptr;
    RW_EXPECTS(x == nullptr || !x->has_shape || x->dims.size() == 4, Unsupported,
               "{}: X {} is not supported; GridSample samples [N, C, H, W] images", node.where(),
               x == nullptr ? "" : x->description());
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor x = ctx.input(0).contiguous();
    const Tensor grid = ctx.input(1).contiguous();
    nn::expect_f32(node, x, "X");
    nn::expect_f32(node, grid, "grid");
    RW_EXPECTS(x.rank() == 4, Unsupported,
               "{}: X {} is not supported; GridSample samples [N, C, H, W] images", node.where(),
               x.description());
    RW_EXPECTS(grid.rank() == 4 && grid.dim(0) == x.dim(0) && grid.dim(3) == 2, InvalidArgument,
               "{}: grid {} must be [N, H_out, W_out, 2] for X {}", node.where(),
               grid.description(), x.description());
    const std::int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
    const std::int64_t ho = grid.dim(1), wo = grid.dim(2);
    Tensor y = ctx.allocate_output(0, DType::kF32, {n, c, ho, wo});
    ctx.outputs[0] = y;
    if (y.numel() == 0) return;

    const float* xp = x.data<float>();
    const float* gp = grid.data<float>();
    float* yp = y.data<float>();
    const std::int64_t plane = h * w, out_plane = ho * wo;
    parallel_for(n * ho, std::max<std::int64_t>(1, 1024 / std::max<std::int64_t>(1, wo * c)),
                 [&](std::int64_t begin, std::int64_t end) {
                   for (std::int64_t r = begin; r < end; ++r) {
                     const std::int64_t b = r / ho;
                     const float* image = xp + b * c * plane;
                     for (std::int64_t j = 0; j < wo; ++j) {
                       const float* g = gp + (r * wo + j) * 2;
                       float* out = yp + b * c * out_plane + (r % ho) * wo + j;
                       AxisTaps tx, ty;
                       if (!axis_taps(g[0], w, tx) || !axis_taps(g[1], h, ty)) {
                         for (std::int64_t ch = 0; ch < c; ++ch) out[ch * out_plane] = 0.0f;
                         continue;
                       }
                       for (std::int64_t ch = 0; ch < c; ++ch) {
                         const float* src = image + ch * plane;
                         float sum = 0.0f;
                         for (int ky = 0; ky < ty.count; ++ky) {
                           if (ty.weight[ky] == 0.0f) continue;
                           const float* row = src + ty.index[ky] * w;
                           float acc = 0.0f;
                           for (int kx = 0; kx < tx.count; ++kx) acc += tx.weight[kx] * row[tx.index[kx]];
                           sum += ty.weight[ky] * acc;
                         }
                         out[ch * out_plane] = sum;
                       }
                     }
                   }
                 });
  }

 private:
  // The taps of normalized coordinate g along an axis of `size` pixels; false when g is NaN or
  // infinite.
  bool axis_taps(float g, std::int64_t size, AxisTaps& t) const {
    if (!std::isfinite(g)) return false;
    float v = align_corners_ ? (g + 1.0f) / 2.0f * float(size - 1) : ((g + 1.0f) * float(size) - 1.0f) / 2.0f;
    const float lo = align_corners_ ? 0.0f : -0.5f;
    const float hi = align_corners_ ? float(size - 1) : float(size) - 0.5f;
    if (mode_ == Mode::kNearest) v = std::nearbyint(v);
    if (v < lo || v > hi) {
      if (padding_ == Padding::kBorder) v = std::clamp(v, 0.0f, float(size - 1));
      if (padding_ == Padding::kReflection) v = reflect(v, lo, hi);
      // zeros: every tap from 3 pixels outside on reads 0, so the location may stop there (and
      // stays an index an int64 holds).
      if (padding_ == Padding::kZeros) v = std::clamp(v, -4.0f, float(size) + 3.0f);
    }
    // Pixel i as padding_mode reads it; weight 0 marks a zero.
    auto tap = [&](int k, std::int64_t i, float weight) {
      if (padding_ == Padding::kBorder) {
        i = std::clamp<std::int64_t>(i, 0, size - 1);
      } else if (padding_ == Padding::kReflection) {
        i = std::clamp<std::int64_t>(static_cast<std::int64_t>(reflect(float(i), lo, hi)), 0, size - 1);
      } else if (i < 0 || i >= size) {
        i = 0;
        weight = 0.0f;
      }
      t.index[k] = i;
      t.weight[k] = weight;
    };
    if (mode_ == Mode::kNearest) {
      t.count = 1;
      tap(0, static_cast<std::int64_t>(v), 1.0f);
      return true;
    }
    const float base = std::floor(v);
    const float frac = v - base;
    const std::int64_t i0 = static_cast<std::int64_t>(base);
    if (mode_ == Mode::kBilinear) {
      t.count = 2;
      tap(0, i0, 1.0f - frac);
      tap(1, i0 + 1, frac);
    } else {
      t.count = 4;
      for (int k = 0; k < 4; ++k) {
        tap(k, i0 - 1 + k, static_cast<float>(keys_cubic(double(frac) + 1.0 - k, -0.75)));
      }
    }
    return true;
  }

  Mode mode_ = Mode::kBilinear;
  Padding padding_ = Padding::kZeros;
  bool align_corners_ = false;
};

}  // namespace

RW_REGISTER_KERNEL("GridSample", Device::kCpu, make_factory<GridSampleKernel>());

}  // namespace redwood::cpu
