// Resize (ONNX opsets 10-22) and Upsample (opsets 7-9): nearest, linear and cubic interpolation
// over any axes.
//
// Inputs: Resize-10 (X, scales); Resize-11+ (X, roi, scales, sizes), where exactly one of scales
// and sizes is given (an empty tensor counts as absent) and roi only matters for
// tf_crop_and_resize. Opset 18's `axes` attribute restricts scales, sizes and roi to those axes.
// Upsample is Resize-10 by another name (modes nearest and linear): Upsample-7 takes its scales
// as an attribute, Upsample-9 as input 1.
//
// Output extents: floor(in * scale) for scales; sizes as given, or with opset 18's
// keep_aspect_ratio_policy not_larger / not_smaller one scale for every listed axis, the smallest
// / largest sizes[i] / in[i], and extents round_half_up(in * scale).
//
// Every output coordinate x maps to an input coordinate x_in per axis (in double, as the ONNX
// reference computes it), with the axis' scale (out / in for sizes):
//   half_pixel            (x + 0.5) / scale - 0.5
//   half_pixel_symmetric  in / 2 * (1 - out / length) + (x + 0.5) / scale - 0.5   (opset 19)
//   asymmetric            x / scale      (the only mapping of Resize-10 and Upsample)
//   align_corners         x * (in - 1) / (length - 1), 0 when length == 1
//   pytorch_half_pixel    (x + 0.5) / scale - 0.5, -0.5 when length == 1
//   tf_half_pixel_for_nn  (x + 0.5) / scale
//   tf_crop_and_resize    (start + x * (end - start) / (length - 1)) * (in - 1), the roi's
//                         [start, end] of the axis; (start + end) / 2 * (in - 1) when length == 1;
//                         an output whose x_in leaves [0, in - 1] on any axis is
//                         extrapolation_value
// where length = in * scale, unrounded (the ONNX reference uses it; it differs from the output
// extent only when scales are given).
//
// nearest picks floor or ceil of x_in per nearest_mode (an integral x_in picks itself); Resize-10
// and Upsample have no nearest_mode and, as ONNX Runtime, take ceil when the axis shrinks and
// floor when it grows. linear and cubic weight the taps around x_in by a kernel of their distance:
// 1 - d for linear (2 taps), Keys' cubic with cubic_coeff_a for cubic (4 taps). Taps past the
// edges read the edge, or with exclude_outside weigh 0 and the others are renormalized. With
// opset 18's antialias an axis that shrinks by `scale` stretches the kernel by 1 / scale (more
// taps; weights renormalized), so that each output averages all the inputs it covers; nearest
// ignores it. The interpolation is separable: one axis at a time.

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/nn_common.hpp"
#include "backends/cpu/reference/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace redwood::cpu {
namespace {

enum class Mode { kNearest, kLinear, kCubic };
enum class Transform {
  kHalfPixel,
  kHalfPixelSymmetric,
  kAsymmetric,
  kAlignCorners,
  kPytorchHalfPixel,
  kTfHalfPixelForNn,
  kTfCropAndResize
};
enum class Nearest { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kLegacy };
enum class AspectPolicy { kStretch, kNotLarger, kNotSmaller };

// One axis of a run: extents, scale and (tf_crop_and_resize) the roi.
struct AxisGeometry {
  std::int64_t in = 1, out = 1;
  double scale = 1.0;
  double roi_start = 0.0, roi_end = 1.0;
};

// How one output axis reads its input axis: output index o is the sum over k < width of
// weight[o * width + k] * in[index[o * width + k]] (nearest: width 1, weight 1).
struct AxisTaps {
  std::int64_t width = 1;
  std::vector<std::int64_t> index;
  std::vector<float> weight;
  std::vector<char> outside;  // per output index: x_in left the input (tf_crop_and_resize only)
  bool identity = false;      // out == in and every output reads its own input
};

class ResizeKernel final : public Kernel {
 public:
  ResizeKernel(const Node& node, const KernelInfo& info, bool upsample) {
    expect_dtype(node, info.input_dtypes.empty() ? DType::kUndefined : info.input_dtypes[0],
                 {DType::kF32}, "X");
    const bool legacy = upsample || info.opset < 11;
    if (upsample) {
      RW_EXPECTS(info.opset >= 7, Unsupported,
                 "{}: Upsample of opset {} (height_scale, width_scale) is not supported; opset 7 "
                 "and later are",
                 node.where(), info.opset);
      if (info.opset < 9) {
        attr_scales_ = node.attr_floats("scales");
        RW_EXPECTS(!attr_scales_.empty(), InvalidArgument,
                   "{}: the scales attribute is required", node.where());
      } else {
        scales_input_ = 1;
      }
    } else if (info.opset < 11) {
      scales_input_ = 1;
    } else {
      roi_input_ = 1;
      scales_input_ = 2;
      sizes_input_ = 3;
    }

    mode_ = attr_choice<Mode>(node, "mode", "nearest",
                              {{"nearest", Mode::kNearest},
                               {"linear", Mode::kLinear},
                               {"cubic", Mode::kCubic}});
    RW_EXPECTS(!legacy || mode_ != Mode::kCubic, InvalidArgument,
               "{}: mode 'cubic' needs Resize of opset 11 or later", node.where());
    if (legacy) {
      transform_ = Transform::kAsymmetric;
      nearest_ = Nearest::kLegacy;
      return;
    }
    transform_ = attr_choice<Transform>(
        node, "coordinate_transformation_mode", "half_pixel",
        {{"half_pixel", Transform::kHalfPixel},
         {"half_pixel_symmetric", Transform::kHalfPixelSymmetric},
         {"asymmetric", Transform::kAsymmetric},
         {"align_corners", Transform::kAlignCorners},
         {"pytorch_half_pixel", Transform::kPytorchHalfPixel},
         {"tf_half_pixel_for_nn", Transform::kTfHalfPixelForNn},
         {"tf_crop_and_resize", Transform::kTfCropAndResize}});
    nearest_ = attr_choice<Nearest>(node, "nearest_mode", "round_prefer_floor",
                                    {{"round_prefer_floor", Nearest::kRoundPreferFloor},
                                     {"round_prefer_ceil", Nearest::kRoundPreferCeil},
                                     {"floor", Nearest::kFloor},
                                     {"ceil", Nearest::kCeil}});
    policy_ = attr_choice<AspectPolicy>(node, "keep_aspect_ratio_policy", "stretch",
                                        {{"stretch", AspectPolicy::kStretch},
                                         {"not_larger", AspectPolicy::kNotLarger},
                                         {"not_smaller", AspectPolicy::kNotSmaller}});
    cubic_a_ = node.attr_float("cubic_coeff_a", -0.75f);
    exclude_outside_ = node.attr_int("exclude_outside", 0) != 0;
    antialias_ = node.attr_int("antialias", 0) != 0;
    extrapolation_value_ = node.attr_float("extrapolation_value", 0.0f);
    axes_ = node.attr_ints("axes");
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor x = ctx.input(0).contiguous();
    nn::expect_f32(node, x, "X");
    const std::int64_t rank = x.rank();
    RW_EXPECTS(rank >= 1, InvalidArgument, "{}: X {} has no axis to resize", node.where(),
               x.description());
    const std::vector<std::int64_t> axes = resolve_axes(node, x);
    std::vector<AxisGeometry> geometry = output_geometry(ctx, x, axes);
    if (transform_ == Transform::kTfCropAndResize) read_roi(ctx, axes, geometry);

    Shape out_shape(static_cast<std::size_t>(rank));
    for (std::size_t a = 0; a < geometry.size(); ++a) out_shape[a] = geometry[a].out;
    Tensor y = ctx.allocate_output(0, DType::kF32, out_shape);
    ctx.outputs[0] = y;
    if (y.numel() == 0) return;
    RW_EXPECTS(x.numel() > 0, InvalidArgument, "{}: cannot resize the empty X {} to {}",
               node.where(), shape_str(x.shape()), shape_str(out_shape));

    std::vector<AxisTaps> taps;
    taps.reserve(geometry.size());
    for (const AxisGeometry& g : geometry) taps.push_back(axis_taps(g));
    if (mode_ == Mode::kNearest) {
      gather_nearest(x, taps, y);
    } else {
      interpolate(x, taps, y);
    }
    fill_outside(taps, extrapolation_value_, y);
  }

 private:
  std::vector<std::int64_t> resolve_axes(const Node& node, const Tensor& x) const {
    const std::int64_t rank = x.rank();
    std::vector<std::int64_t> axes;
    if (axes_.empty()) {
      for (std::int64_t i = 0; i < rank; ++i) axes.push_back(i);
      return axes;
    }
    for (std::int64_t a : axes_) {
      RW_EXPECTS(a >= -rank && a < rank, InvalidArgument, "{}: axis {} is out of range for X {}",
                 node.where(), a, shape_str(x.shape()));
      const std::int64_t axis = a < 0 ? a + rank : a;
      RW_EXPECTS(std::find(axes.begin(), axes.end(), axis) == axes.end(), InvalidArgument,
                 "{}: axis {} is listed twice in axes", node.where(), a);
      axes.push_back(axis);
    }
    return axes;
  }

  // Per-axis extents and scales from the scales (input or Upsample-7's attribute) or the sizes;
  // axes not listed keep their extent and scale 1.
  std::vector<AxisGeometry> output_geometry(const KernelContext& ctx, const Tensor& x,
                                            const std::vector<std::int64_t>& axes) const {
    const Node& node = ctx.node;
    std::vector<AxisGeometry> geometry(static_cast<std::size_t>(x.rank()));
    for (std::size_t a = 0; a < geometry.size(); ++a) {
      geometry[a].in = geometry[a].out = x.dim(std::int64_t(a));
    }
    auto present = [&](int i) { return i >= 0 && ctx.has_input(std::size_t(i)) && ctx.input(std::size_t(i)).numel() > 0; };
    const bool has_scales = !attr_scales_.empty() || present(scales_input_);
    const bool has_sizes = present(sizes_input_);
    RW_EXPECTS(has_scales != has_sizes, InvalidArgument,
               "{}: exactly one of scales and sizes must be given (scales {}, sizes {})",
               node.where(), has_scales ? "given" : "absent", has_sizes ? "given" : "absent");
    // An extent from the model's numbers (constant folding runs this at load): one past 2^56 (or
    // an infinite one) is an error here, before it is converted to an integer.
    auto extent = [&](double value, std::int64_t axis, double scale) {
      RW_EXPECTS(value <= double(kMaxElements), InvalidArgument,
                 "{}: scale {} makes axis {} of X {} {} long", node.where(), scale, axis,
                 shape_str(x.shape()), value);
      return static_cast<std::int64_t>(value);
    };

    if (has_scales) {
      std::vector<float> values = attr_scales_;
      if (values.empty()) {
        const Tensor& s = ctx.input(std::size_t(scales_input_));
        RW_EXPECTS(s.dtype() == DType::kF32, InvalidArgument, "{}: scales {} must be float",
                   node.where(), s.description());
        values = s.contiguous().to_float_vector();
      }
      RW_EXPECTS(values.size() == axes.size(), InvalidArgument,
                 "{}: {} scales for {} axes of X {}", node.where(), values.size(), axes.size(),
                 shape_str(x.shape()));
      for (std::size_t i = 0; i < axes.size(); ++i) {
        RW_EXPECTS(values[i] > 0, InvalidArgument, "{}: scales must be positive, got {}",
                   node.where(), values[i]);
        AxisGeometry& g = geometry[static_cast<std::size_t>(axes[i])];
        g.scale = values[i];
        g.out = extent(std::floor(g.scale * double(g.in)), axes[i], g.scale);
      }
      return geometry;
    }

    const Tensor& s = ctx.input(std::size_t(sizes_input_));
    RW_EXPECTS(s.dtype() == DType::kI64 && s.numel() == std::int64_t(axes.size()),
               InvalidArgument, "{}: sizes {} must be int64 with {} values for X {}",
               node.where(), s.description(), axes.size(), shape_str(x.shape()));
    const std::vector<std::int64_t> values = s.contiguous().to_int64_vector();
    for (std::size_t i = 0; i < axes.size(); ++i) {
      const AxisGeometry& g = geometry[static_cast<std::size_t>(axes[i])];
      RW_EXPECTS(values[i] >= 0, InvalidArgument, "{}: sizes must not be negative, got {}",
                 node.where(), values[i]);
      RW_EXPECTS(g.in > 0 || values[i] == 0, InvalidArgument,
                 "{}: cannot resize the empty axis {} of X {} to {}", node.where(), axes[i],
                 shape_str(x.shape()), values[i]);
    }
    if (policy_ == AspectPolicy::kStretch) {
      for (std::size_t i = 0; i < axes.size(); ++i) {
        AxisGeometry& g = geometry[static_cast<std::size_t>(axes[i])];
        g.out = values[i];
        if (g.in > 0) g.scale = double(values[i]) / double(g.in);
      }
      return geometry;
    }
    // One scale for all listed axes, so that the picture keeps its aspect ratio.
    double scale = policy_ == AspectPolicy::kNotLarger ? std::numeric_limits<double>::infinity() : 0.0;
    for (std::size_t i = 0; i < axes.size(); ++i) {
      const AxisGeometry& g = geometry[static_cast<std::size_t>(axes[i])];
      RW_EXPECTS(g.in > 0, InvalidArgument,
                 "{}: keep_aspect_ratio_policy cannot keep the ratio of the empty axis {} of X {}",
                 node.where(), axes[i], shape_str(x.shape()));
      const double ratio = double(values[i]) / double(g.in);
      scale = policy_ == AspectPolicy::kNotLarger ? std::min(scale, ratio) : std::max(scale, ratio);
    }
    for (std::int64_t a : axes) {
      AxisGeometry& g = geometry[static_cast<std::size_t>(a)];
      g.scale = scale;
      g.out = extent(std::floor(scale * double(g.in) + 0.5), a, scale);
    }
    return geometry;
  }

  // tf_crop_and_resize: the roi's [start..., end...] for the listed axes (all, without axes).
  void read_roi(const KernelContext& ctx, const std::vector<std::int64_t>& axes,
                std::vector<AxisGeometry>& geometry) const {
    const Node& node = ctx.node;
    RW_EXPECTS(ctx.has_input(std::size_t(roi_input_)), InvalidArgument,
               "{}: tf_crop_and_resize needs the roi input", node.where());
    const Tensor& roi = ctx.input(std::size_t(roi_input_));
    RW_EXPECTS(roi.numel() == 2 * std::int64_t(axes.size()), InvalidArgument,
               "{}: roi {} must hold a start and an end for each of the {} axes", node.where(),
               roi.description(), axes.size());
    const std::vector<float> values = roi.contiguous().to_float_vector();
    for (std::size_t i = 0; i < axes.size(); ++i) {
      AxisGeometry& g = geometry[static_cast<std::size_t>(axes[i])];
      g.roi_start = values[i];
      g.roi_end = values[axes.size() + i];
    }
  }

  double source_coordinate(std::int64_t x, const AxisGeometry& g) const {
    const double length = double(g.in) * g.scale;  // the unrounded output extent
    switch (transform_) {
      case Transform::kHalfPixel:
        return (double(x) + 0.5) / g.scale - 0.5;
      case Transform::kHalfPixelSymmetric:
        return double(g.in) / 2 * (1 - double(g.out) / length) + (double(x) + 0.5) / g.scale - 0.5;
      case Transform::kAsymmetric:
        return double(x) / g.scale;
      case Transform::kAlignCorners:
        return length == 1.0 ? 0.0 : double(x) * double(g.in - 1) / (length - 1.0);
      case Transform::kPytorchHalfPixel:
        return length == 1.0 ? -0.5 : (double(x) + 0.5) / g.scale - 0.5;
      case Transform::kTfHalfPixelForNn:
        return (double(x) + 0.5) / g.scale;
      case Transform::kTfCropAndResize: {
        const double span = (g.roi_end - g.roi_start) * double(g.in - 1);
        const double start = g.roi_start * double(g.in - 1);
        return length == 1.0 ? start + span / 2 : start + double(x) * span / (length - 1.0);
      }
    }
    return 0.0;
  }

  AxisTaps axis_taps(const AxisGeometry& g) const {
    AxisTaps taps;
    const std::int64_t in = g.in;
    auto clamp = [in](std::int64_t i) { return std::clamp<std::int64_t>(i, 0, in - 1); };
    // Linear and cubic: taps at base + first ... base + first + width - 1, where base is the
    // input left of x_in (x_in - base in (0, 1], as the ONNX reference counts).
    const double support = mode_ == Mode::kCubic ? 2.0 : 1.0;
    const double stretch = antialias_ && g.scale < 1.0 ? g.scale : 1.0;
    const std::int64_t first = static_cast<std::int64_t>(std::floor(-support / stretch)) + 1;
    taps.width = mode_ == Mode::kNearest ? 1 : 2 - 2 * first;
    taps.index.resize(static_cast<std::size_t>(g.out * taps.width), 0);
    taps.weight.resize(taps.index.size(), 0.0f);
    if (transform_ == Transform::kTfCropAndResize) taps.outside.resize(std::size_t(g.out), 0);
    taps.identity = g.in == g.out;
    const bool normalize = antialias_ || exclude_outside_;

    std::vector<double> w(static_cast<std::size_t>(taps.width));
    for (std::int64_t o = 0; o < g.out; ++o) {
      const double x_in = source_coordinate(o, g);
      std::int64_t* index = taps.index.data() + o * taps.width;
      float* weight = taps.weight.data() + o * taps.width;
      if (transform_ == Transform::kTfCropAndResize && !(x_in >= 0.0 && x_in <= double(in - 1))) {
        taps.outside[std::size_t(o)] = 1;  // filled with extrapolation_value at the end
        taps.identity = false;
        continue;
      }
      if (mode_ == Mode::kNearest) {
        const double lower = std::floor(x_in);
        const double frac = x_in - lower;
        bool up = false;
        if (frac != 0.0) {
          switch (nearest_) {
            case Nearest::kRoundPreferFloor: up = frac > 0.5; break;
            case Nearest::kRoundPreferCeil: up = frac >= 0.5; break;
            case Nearest::kFloor: up = false; break;
            case Nearest::kCeil: up = true; break;
            case Nearest::kLegacy: up = g.scale < 1.0; break;
          }
        }
        index[0] = clamp(static_cast<std::int64_t>(lower) + (up ? 1 : 0));
        weight[0] = 1.0f;
        taps.identity = taps.identity && index[0] == o;
        continue;
      }
      const std::int64_t base = static_cast<std::int64_t>(std::ceil(x_in)) - 1;
      const double ratio = x_in - double(base);
      double sum = 0.0;
      for (std::int64_t k = 0; k < taps.width; ++k) {
        const std::int64_t i = first + k;
        const double d = stretch * (double(i) - ratio);
        double v = mode_ == Mode::kCubic ? keys_cubic(d, cubic_a_) : std::max(0.0, 1.0 - std::abs(d));
        if (exclude_outside_ && (base + i < 0 || base + i >= in)) v = 0.0;
        w[std::size_t(k)] = v;
        sum += v;
      }
      double own = 0.0;  // the weight on input o, for the identity test
      for (std::int64_t k = 0; k < taps.width; ++k) {
        const double v = normalize && sum != 0.0 ? w[std::size_t(k)] / sum : w[std::size_t(k)];
        index[k] = clamp(base + first + k);
        weight[k] = static_cast<float>(v);
        if (index[k] == o) {
          own += v;
        } else if (v != 0.0) {
          taps.identity = false;
        }
      }
      taps.identity = taps.identity && own == 1.0;
    }
    return taps;
  }

  // y[o...] = x[tap(o)...]: one index table per axis; rows of the last axis are gathered.
  static void gather_nearest(const Tensor& x, const std::vector<AxisTaps>& taps, Tensor& y) {
    const Shape& out_shape = y.shape();
    const std::size_t rank = out_shape.size();
    const Strides in_strides = contiguous_strides(x.shape());
    const std::int64_t row = out_shape.back();
    const std::int64_t rows = y.numel() / row;
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    parallel_for(rows, std::max<std::int64_t>(1, 4096 / row), [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t r = begin; r < end; ++r) {
        std::int64_t rest = r, offset = 0;
        for (std::size_t a = rank - 1; a-- > 0;) {
          offset += taps[a].index[std::size_t(rest % out_shape[a])] * in_strides[a];
          rest /= out_shape[a];
        }
        const float* src = xp + offset;
        float* dst = yp + r * row;
        const std::int64_t* last = taps[rank - 1].index.data();
        for (std::int64_t o = 0; o < row; ++o) dst[o] = src[last[o]];
      }
    });
  }

  // Interpolation one axis at a time, innermost first: [outer, in, inner] -> [outer, out, inner].
  static void interpolate(const Tensor& x, const std::vector<AxisTaps>& taps, Tensor& y) {
    const std::size_t rank = taps.size();
    std::vector<std::size_t> work;  // axes whose taps are not the identity
    for (std::size_t a = 0; a < rank; ++a) {
      if (!taps[a].identity) work.push_back(a);
    }
    if (work.empty()) {
      std::copy(x.data<float>(), x.data<float>() + x.numel(), y.data<float>());
      return;
    }
    Tensor current = x;
    Shape shape = x.shape();
    for (std::size_t step = 0; step < work.size(); ++step) {
      const std::size_t a = work[work.size() - 1 - step];
      Shape next_shape = shape;
      next_shape[a] = y.shape()[a];
      Tensor next = step + 1 == work.size() ? y : Tensor::empty(DType::kF32, next_shape);
      std::int64_t outer = 1, inner = 1;
      for (std::size_t i = 0; i < a; ++i) outer *= shape[i];
      for (std::size_t i = a + 1; i < rank; ++i) inner *= shape[i];
      const std::int64_t in_len = shape[a], out_len = next_shape[a], width = taps[a].width;
      const float* src = current.data<float>();
      float* dst = next.data<float>();
      const std::int64_t* index = taps[a].index.data();
      const float* weight = taps[a].weight.data();
      parallel_for(outer * out_len, std::max<std::int64_t>(1, 4096 / (inner * width)),
                   [&](std::int64_t begin, std::int64_t end) {
                     for (std::int64_t r = begin; r < end; ++r) {
                       const std::int64_t o = r / out_len, j = r % out_len;
                       const std::int64_t* ti = index + j * width;
                       const float* tw = weight + j * width;
                       const float* plane = src + o * in_len * inner;
                       float* d = dst + r * inner;
                       const float* s0 = plane + ti[0] * inner;
                       for (std::int64_t i = 0; i < inner; ++i) d[i] = tw[0] * s0[i];
                       for (std::int64_t k = 1; k < width; ++k) {
                         if (tw[k] == 0.0f) continue;
                         const float* s = plane + ti[k] * inner;
                         for (std::int64_t i = 0; i < inner; ++i) d[i] += tw[k] * s[i];
                       }
                     }
                   });
      current = next;
      shape = next_shape;
    }
  }

  // tf_crop_and_resize: every output whose coordinate left the input on some axis is `value`.
  static void fill_outside(const std::vector<AxisTaps>& taps, float value, Tensor& y) {
    const bool any = std::any_of(taps.begin(), taps.end(), [](const AxisTaps& t) {
      return std::find(t.outside.begin(), t.outside.end(), char{1}) != t.outside.end();
    });
    if (!any) return;
    const Shape& out_shape = y.shape();
    const std::size_t rank = out_shape.size();
    const std::int64_t row = out_shape.back();
    float* yp = y.data<float>();
    const std::vector<char>& last = taps[rank - 1].outside;
    parallel_for(y.numel() / row, std::max<std::int64_t>(1, 4096 / row), [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t r = begin; r < end; ++r) {
        bool whole_row = false;
        std::int64_t rest = r;
        for (std::size_t a = rank - 1; a-- > 0;) {
          whole_row = whole_row || taps[a].outside[std::size_t(rest % out_shape[a])] != 0;
          rest /= out_shape[a];
        }
        float* dst = yp + r * row;
        for (std::int64_t o = 0; o < row; ++o) {
          if (whole_row || last[std::size_t(o)] != 0) dst[o] = value;
        }
      }
    });
  }

  int scales_input_ = -1, sizes_input_ = -1, roi_input_ = -1;  // -1: the op has no such input
  std::vector<float> attr_scales_;                               // Upsample-7
  Mode mode_ = Mode::kNearest;
  Transform transform_ = Transform::kHalfPixel;
  Nearest nearest_ = Nearest::kRoundPreferFloor;
  AspectPolicy policy_ = AspectPolicy::kStretch;
  double cubic_a_ = -0.75;
  bool exclude_outside_ = false;
  bool antialias_ = false;
  float extrapolation_value_ = 0.0f;
  std::vector<std::int64_t> axes_;
};

KernelFactory resize_factory(bool upsample) {
  return [upsample](const Node& node, const KernelInfo& info) -> std::unique_ptr<Kernel> {
    return std::make_unique<ResizeKernel>(node, info, upsample);
  };
}

}  // namespace

RW_REGISTER_KERNEL("Resize", Device::kCpu, resize_factory(/*upsample=*/false));
RW_REGISTER_KERNEL("Upsample", Device::kCpu, resize_factory(/*upsample=*/true));

}  // namespace redwood::cpu
