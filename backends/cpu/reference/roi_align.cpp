// RoiAlign (ONNX opsets 10, 16 and 22): X [N, C, H, W], rois [R, 4] of (x1, y1, x2, y2) in
// the coordinates of the image X was computed from, batch_indices [R] -> Y [R, C, output_height,
// output_width].
//
// Each roi, scaled by spatial_scale, is cut into output_height x output_width bins; each bin
// samples a grid of sampling_ratio x sampling_ratio points evenly spread inside it (with
// sampling_ratio 0, ceil(roi extent / bins) points per axis), reads each point by bilinear
// interpolation, and averages the samples (mode avg) or takes their max (mode max).
// coordinate_transformation_mode half_pixel (opset 16's default) shifts the scaled roi by -0.5
// pixel; output_half_pixel (opset 10's only behaviour) does not, and widens a roi narrower than
// one pixel to one.
//
// The arithmetic follows ONNX Runtime (and the ONNX reference built from it): float; a point
// more than one pixel outside the image reads 0, one within clamps to the edge; and mode max
// takes, per point, the largest of the four weighted corners (weight * value), not the
// interpolated value.

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/nn_common.hpp"
#include "backends/cpu/reference/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace redwood::cpu {
namespace {

enum class Pool { kAverage, kMax };

// One sampling point along one axis: the two pixels it reads and their weights (both 0 for a
// point outside the image).
struct AxisSample {
  std::int64_t low = 0, high = 0;
  float w_low = 0.0f, w_high = 0.0f;
};

// The points of every bin along one axis of `size` pixels: bins x grid entries, bin-major.
std::vector<AxisSample> axis_samples(float start, float bin, std::int64_t bins, std::int64_t grid,
                                     std::int64_t size) {
  std::vector<AxisSample> samples(static_cast<std::size_t>(std::max<std::int64_t>(0, bins * grid)));
  for (std::int64_t b = 0; b < bins; ++b) {
    for (std::int64_t g = 0; g < grid; ++g) {
      float v = start + float(b) * bin + (float(g) + 0.5f) * bin / float(grid);
      AxisSample& s = samples[static_cast<std::size_t>(b * grid + g)];
      if (!(v >= -1.0f && v <= float(size))) continue;  // outside (or NaN): reads 0
      v = std::max(v, 0.0f);
      s.low = static_cast<std::int64_t>(v);
      if (s.low >= size - 1) {
        s.low = s.high = size - 1;
        v = float(s.low);
      } else {
        s.high = s.low + 1;
      }
      s.w_high = v - float(s.low);
      s.w_low = 1.0f - s.w_high;
    }
  }
  return samples;
}

class RoiAlignKernel final : public Kernel {
 public:
  RoiAlignKernel(const Node& node, const KernelInfo& info) {
    const auto dtype = [&](std::size_t i) {
      return i < info.input_dtypes.size() ? info.input_dtypes[i] : DType::kUndefined;
    };
    expect_dtype(node, dtype(0), {DType::kF32}, "X");
    expect_dtype(node, dtype(1), {DType::kF32}, "rois");
    expect_dtype(node, dtype(2), {DType::kI64, DType::kI32}, "batch_indices");
    pool_ = attr_choice<Pool>(node, "mode", "avg", {{"avg", Pool::kAverage}, {"max", Pool::kMax}});
    half_pixel_ = info.opset >= 16 &&
                  attr_choice<bool>(node, "coordinate_transformation_mode", "half_pixel",
                                    {{"half_pixel", true}, {"output_half_pixel", false}});
    out_h_ = node.attr_int("output_height", 1);
    out_w_ = node.attr_int("output_width", 1);
    sampling_ratio_ = node.attr_int("sampling_ratio", 0);
    spatial_scale_ = node.attr_float("spatial_scale", 1.0f);
    RW_EXPECTS(out_h_ > 0 && out_w_ > 0, InvalidArgument,
               "{}: output_height and output_width must be positive, got {} and {}", node.where(),
               out_h_, out_w_);
    RW_EXPECTS(sampling_ratio_ >= 0, InvalidArgument,
               "{}: sampling_ratio must not be negative, got {}", node.where(), sampling_ratio_);
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor x = ctx.input(0).contiguous();
    const Tensor rois = ctx.input(1).contiguous();
    const Tensor& indices = ctx.input(2);
    nn::expect_f32(node, x, "X");
    nn::expect_f32(node, rois, "rois");
    RW_EXPECTS(x.rank() == 4, InvalidArgument, "{}: X {} must be [N, C, H, W]", node.where(),
               x.description());
    RW_EXPECTS(rois.rank() == 2 && rois.dim(1) == 4, InvalidArgument,
               "{}: rois {} must be [num_rois, 4]", node.where(), rois.description());
    RW_EXPECTS((indices.dtype() == DType::kI64 || indices.dtype() == DType::kI32) &&
                   indices.rank() == 1 && indices.dim(0) == rois.dim(0),
               InvalidArgument, "{}: batch_indices {} must be integers, one per roi of {}",
               node.where(), indices.description(), rois.description());
    const std::vector<std::int64_t> batch = indices.to_int64_vector();
    for (std::size_t i = 0; i < batch.size(); ++i) {
      RW_EXPECTS(batch[i] >= 0 && batch[i] < x.dim(0), InvalidArgument,
                 "{}: batch index {} of roi {} is outside X {}", node.where(), batch[i], i,
                 x.description());
    }
    const std::int64_t num_rois = rois.dim(0), channels = x.dim(1), h = x.dim(2), w = x.dim(3);
    Tensor y = ctx.allocate_output(0, DType::kF32, {num_rois, channels, out_h_, out_w_});
    ctx.outputs[0] = y;
    if (y.numel() == 0) return;

    // The sampling points of each roi, shared by its channels.
    struct RoiGrid {
      std::vector<AxisSample> ys, xs;
      std::int64_t grid_h = 0, grid_w = 0;
      float count = 1.0f;
    };
    std::vector<RoiGrid> grids(static_cast<std::size_t>(num_rois));
    const float* rp = rois.data<float>();
    const float offset = half_pixel_ ? 0.5f : 0.0f;
    parallel_for(num_rois, 16, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t r = begin; r < end; ++r) {
        const float* roi = rp + r * 4;
        const float x1 = roi[0] * spatial_scale_ - offset, y1 = roi[1] * spatial_scale_ - offset;
        float roi_w = roi[2] * spatial_scale_ - offset - x1;
        float roi_h = roi[3] * spatial_scale_ - offset - y1;
        if (!half_pixel_) {
          roi_w = std::max(roi_w, 1.0f);
          roi_h = std::max(roi_h, 1.0f);
        }
        const float bin_h = roi_h / float(out_h_), bin_w = roi_w / float(out_w_);
        RoiGrid& g = grids[static_cast<std::size_t>(r)];
        g.grid_h = sampling_ratio_ > 0 ? sampling_ratio_ : adaptive_grid(bin_h, node);
        g.grid_w = sampling_ratio_ > 0 ? sampling_ratio_ : adaptive_grid(bin_w, node);
        g.count = float(std::max<std::int64_t>(g.grid_h * g.grid_w, 1));
        g.ys = axis_samples(y1, bin_h, out_h_, g.grid_h, h);
        g.xs = axis_samples(x1, bin_w, out_w_, g.grid_w, w);
      }
    });

    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    const std::int64_t out_plane = out_h_ * out_w_;
    parallel_for(num_rois * channels, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t rc = begin; rc < end; ++rc) {
        const std::int64_t r = rc / channels, c = rc % channels;
        const RoiGrid& g = grids[static_cast<std::size_t>(r)];
        const float* src = xp + (batch[static_cast<std::size_t>(r)] * channels + c) * h * w;
        float* dst = yp + rc * out_plane;
        for (std::int64_t ph = 0; ph < out_h_; ++ph) {
          for (std::int64_t pw = 0; pw < out_w_; ++pw) {
            float value = 0.0f;
            bool first = true;
            for (std::int64_t iy = 0; iy < g.grid_h; ++iy) {
              const AxisSample& sy = g.ys[static_cast<std::size_t>(ph * g.grid_h + iy)];
              const float* low = src + sy.low * w;
              const float* high = src + sy.high * w;
              for (std::int64_t ix = 0; ix < g.grid_w; ++ix) {
                const AxisSample& sx = g.xs[static_cast<std::size_t>(pw * g.grid_w + ix)];
                const float c1 = sy.w_low * sx.w_low * low[sx.low];
                const float c2 = sy.w_low * sx.w_high * low[sx.high];
                const float c3 = sy.w_high * sx.w_low * high[sx.low];
                const float c4 = sy.w_high * sx.w_high * high[sx.high];
                if (pool_ == Pool::kAverage) {
                  value += c1 + c2 + c3 + c4;
                } else {
                  const float m = std::max(std::max(c1, c2), std::max(c3, c4));
                  value = first ? m : std::max(value, m);
                  first = false;
                }
              }
            }
            dst[ph * out_w_ + pw] = pool_ == Pool::kAverage ? value / g.count : value;
          }
        }
      }
    });
  }

 private:
  // sampling_ratio 0: ceil(bin extent) points per bin along an axis (none for an empty bin).
  static std::int64_t adaptive_grid(float bin, const Node& node) {
    const float points = std::ceil(bin);
    if (!(points > 0.0f)) return 0;
    RW_EXPECTS(points <= 65536.0f, InvalidArgument,
               "{}: a bin {} pixels long would take as many samples per axis", node.where(), bin);
    return static_cast<std::int64_t>(points);
  }

  Pool pool_ = Pool::kAverage;
  bool half_pixel_ = false;
  std::int64_t out_h_ = 1, out_w_ = 1, sampling_ratio_ = 0;
  float spatial_scale_ = 1.0f;
};

}  // namespace

RW_REGISTER_KERNEL("RoiAlign", Device::kCpu, make_factory<RoiAlignKernel>());

}  // namespace redwood::cpu
