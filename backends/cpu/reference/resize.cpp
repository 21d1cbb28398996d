// Resize (ONNX opsets 10-22), modes nearest and linear over any axes.
//
// Inputs: opset 10 (X, scales); opset 11+ (X, roi, scales, sizes), where exactly one of scales
// and sizes is given (an empty scales tensor counts as absent) and roi only matters for
// tf_crop_and_resize. Opset 18's `axes` attribute restricts scales/sizes to those axes.
//
// Every output coordinate x maps to an input coordinate x_in per axis (in double, as the ONNX
// reference computes it), with scale = out / in for sizes, or the given scale:
//   half_pixel            (x + 0.5) / scale - 0.5
//   asymmetric            x / scale                        (the only mapping of opset 10)
//   align_corners         x * (in - 1) / (length - 1), 0 when length == 1
//   pytorch_half_pixel    (x + 0.5) / scale - 0.5, -0.5 when length == 1
//   tf_half_pixel_for_nn  (x + 0.5) / scale
// where length = in * scale, unrounded (the ONNX reference uses it; it differs from the output
// extent floor(in * scale) only when scales are given).
// nearest picks floor or ceil of x_in per nearest_mode (an integral x_in picks itself); opset 10
// has no nearest_mode and, as ONNX Runtime, takes ceil when the axis shrinks and floor when it
// grows. linear interpolates between floor(x_in) and floor(x_in) + 1, one axis at a time (it is
// separable, so this is N-d linear: bilinear over H and W, trilinear, ...). Indices past the
// edges clamp to the edge.
// Rejected at load, naming the value: cubic, tf_crop_and_resize, half_pixel_symmetric,
// antialias, keep_aspect_ratio_policy other than stretch.

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/nn_common.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace redwood::cpu {
namespace {

enum class Mode { kNearest, kLinear };
enum class Transform { kHalfPixel, kAsymmetric, kAlignCorners, kPytorchHalfPixel, kTfHalfPixelForNn };
enum class Nearest { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kLegacy };

// How one output axis reads its input axis: for nearest, index i0; for linear,
// w0 * in[i0] + w1 * in[i1].
struct Tap {
  std::int64_t i0, i1;
  float w0, w1;
};

class ResizeKernel final : public Kernel {
 public:
  ResizeKernel(const Node& node, const KernelInfo& info) : opset_(info.opset) {
    expect_dtype(node, info.input_dtypes.empty() ? DType::kUndefined : info.input_dtypes[0],
                 {DType::kF32}, "X");
    const std::string mode = node.attr_string("mode", "nearest");
    if (mode == "nearest") {
      mode_ = Mode::kNearest;
    } else if (mode == "linear") {
      mode_ = Mode::kLinear;
    } else {
      throw Unsupported(fmt::format("{}: mode '{}' is not supported (nearest, linear)",
                                    node.where(), mode));
    }

    if (opset_ < 11) {
      transform_ = Transform::kAsymmetric;
      nearest_ = Nearest::kLegacy;
    } else {
      const std::string t = node.attr_string("coordinate_transformation_mode", "half_pixel");
      if (t == "half_pixel") {
        transform_ = Transform::kHalfPixel;
      } else if (t == "asymmetric") {
        transform_ = Transform::kAsymmetric;
      } else if (t == "align_corners") {
        transform_ = Transform::kAlignCorners;
      } else if (t == "pytorch_half_pixel") {
        transform_ = Transform::kPytorchHalfPixel;
      } else if (t == "tf_half_pixel_for_nn") {
        transform_ = Transform::kTfHalfPixelForNn;
      } else {
        throw Unsupported(fmt::format(
            "{}: coordinate_transformation_mode '{}' is not supported (half_pixel, asymmetric, "
            "align_corners, pytorch_half_pixel, tf_half_pixel_for_nn)",
            node.where(), t));
      }
      const std::string n = node.attr_string("nearest_mode", "round_prefer_floor");
      if (n == "round_prefer_floor") {
        nearest_ = Nearest::kRoundPreferFloor;
      } else if (n == "round_prefer_ceil") {
        nearest_ = Nearest::kRoundPreferCeil;
      } else if (n == "floor") {
        nearest_ = Nearest::kFloor;
      } else if (n == "ceil") {
        nearest_ = Nearest::kCeil;
      } else {
        throw Unsupported(fmt::format(
            "{}: nearest_mode '{}' is not supported (round_prefer_floor, round_prefer_ceil, "
            "floor, ceil)",
            node.where(), n));
      }
    }
    RW_EXPECTS(node.attr_int("antialias", 0) == 0, Unsupported,
               "{}: antialias = {} is not supported", node.where(), node.attr_int("antialias", 0));
    const std::string policy = node.attr_string("keep_aspect_ratio_policy", "stretch");
    RW_EXPECTS(policy == "stretch", Unsupported,
               "{}: keep_aspect_ratio_policy '{}' is not supported (stretch)", node.where(), policy);
    axes_ = node.attr_ints("axes");
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor x = ctx.input(0).contiguous();
    nn::expect_f32(node, x, "X");
    const std::int64_t rank = x.rank();

    // Which axes the scales or sizes speak of.
    std::vector<std::int64_t> axes;
    if (axes_.empty()) {
      for (std::int64_t i = 0; i < rank; ++i) axes.push_back(i);
    } else {
      for (std::int64_t a : axes_) {
        RW_EXPECTS(a >= -rank && a < rank, InvalidArgument,
                   "{}: axis {} is out of range for X {}", node.where(), a, shape_str(x.shape()));
        axes.push_back(a < 0 ? a + rank : a);
      }
    }

    // Per-axis scale and output extent; axes not listed keep scale 1.
    std::vector<double> scale(static_cast<std::size_t>(rank), 1.0);
    Shape out_shape = x.shape();
    const std::size_t scales_input = opset_ < 11 ? 1 : 2;
    const bool has_scales = ctx.has_input(scales_input) && ctx.input(scales_input).numel() > 0;
    const bool has_sizes = opset_ >= 11 && ctx.has_input(3) && ctx.input(3).numel() > 0;
    RW_EXPECTS(has_scales != has_sizes, InvalidArgument,
               "{}: exactly one of scales and sizes must be given (scales {}, sizes {})",
               node.where(), has_scales ? "given" : "absent", has_sizes ? "given" : "absent");
    if (has_scales) {
      const Tensor& s = ctx.input(scales_input);
      RW_EXPECTS(s.dtype() == DType::kF32 && s.numel() == std::int64_t(axes.size()),
                 InvalidArgument, "{}: scales {} must be float with {} values for X {}",
                 node.where(), s.description(), axes.size(), shape_str(x.shape()));
      const std::vector<float> values = s.contiguous().to_float_vector();
      for (std::size_t i = 0; i < axes.size(); ++i) {
        RW_EXPECTS(values[i] > 0, InvalidArgument, "{}: scales must be positive, got {}",
                   node.where(), values[i]);
        const std::size_t a = static_cast<std::size_t>(axes[i]);
        scale[a] = values[i];
        // Scales come from the model (constant folding runs this at load): an extent past 2^56
        // (or an infinite scale) is an error here, before it is converted to an integer.
        const double extent = std::floor(scale[a] * double(x.dim(axes[i])));
        RW_EXPECTS(extent <= double(kMaxElements), InvalidArgument, "{}: scale {} makes axis {} of X {} {} long",
                   node.where(), values[i], axes[i], shape_str(x.shape()), extent);
        out_shape[a] = static_cast<std::int64_t>(extent);
      }
    } else {
      const Tensor& s = ctx.input(3);
      RW_EXPECTS(s.dtype() == DType::kI64 && s.numel() == std::int64_t(axes.size()),
                 InvalidArgument, "{}: sizes {} must be int64 with {} values for X {}",
                 node.where(), s.description(), axes.size(), shape_str(x.shape()));
      const std::vector<std::int64_t> values = s.contiguous().to_int64_vector();
      for (std::size_t i = 0; i < axes.size(); ++i) {
        const std::size_t a = static_cast<std::size_t>(axes[i]);
        RW_EXPECTS(values[i] >= 0, InvalidArgument, "{}: sizes must not be negative, got {}",
                   node.where(), values[i]);
        RW_EXPECTS(x.dim(axes[i]) > 0 || values[i] == 0, InvalidArgument,
                   "{}: cannot resize the empty axis {} of X {} to {}", node.where(), axes[i],
                   shape_str(x.shape()), values[i]);
        out_shape[a] = values[i];
        if (x.dim(axes[i]) > 0) scale[a] = double(values[i]) / double(x.dim(axes[i]));
      }
    }

    Tensor y = ctx.allocate_output(0, DType::kF32, out_shape);
    ctx.outputs[0] = y;
    if (y.numel() == 0) return;
    RW_EXPECTS(x.numel() > 0, InvalidArgument, "{}: cannot resize the empty X {} to {}",
               node.where(), shape_str(x.shape()), shape_str(out_shape));

    std::vector<std::vector<Tap>> taps(static_cast<std::size_t>(rank));
    for (std::int64_t a = 0; a < rank; ++a) {
      taps[a] = axis_taps(x.dim(a), out_shape[a], scale[a]);
    }
    if (mode_ == Mode::kNearest) {
      gather_nearest(x, taps, y);
    } else {
      interpolate_linear(x, taps, y);
    }
  }

 private:
  double source_coordinate(std::int64_t x, std::int64_t in, double scale) const {
    const double length = double(in) * scale;  // the unrounded output extent
    switch (transform_) {
      case Transform::kHalfPixel:
        return (double(x) + 0.5) / scale - 0.5;
      case Transform::kAsymmetric:
        return double(x) / scale;
      case Transform::kAlignCorners:
        return length == 1.0 ? 0.0 : double(x) * double(in - 1) / (length - 1.0);
      case Transform::kPytorchHalfPixel:
        return length == 1.0 ? -0.5 : (double(x) + 0.5) / scale - 0.5;
      case Transform::kTfHalfPixelForNn:
        return (double(x) + 0.5) / scale;
    }
    return 0.0;
  }

  std::vector<Tap> axis_taps(std::int64_t in, std::int64_t out, double scale) const {
    std::vector<Tap> taps(static_cast<std::size_t>(out));
    auto clamp = [in](std::int64_t i) { return std::clamp<std::int64_t>(i, 0, in - 1); };
    for (std::int64_t o = 0; o < out; ++o) {
      const double x_in = source_coordinate(o, in, scale);
      const double lower = std::floor(x_in);
      const double frac = x_in - lower;
      const std::int64_t base = static_cast<std::int64_t>(lower);
      if (mode_ == Mode::kNearest) {
        bool up = false;
        if (frac != 0.0) {
          switch (nearest_) {
            case Nearest::kRoundPreferFloor: up = frac > 0.5; break;
            case Nearest::kRoundPreferCeil: up = frac >= 0.5; break;
            case Nearest::kFloor: up = false; break;
            case Nearest::kCeil: up = true; break;
            case Nearest::kLegacy: up = scale < 1.0; break;
          }
        }
        const std::int64_t i = clamp(base + (up ? 1 : 0));
        taps[o] = {i, i, 1.0f, 0.0f};
      } else {
        taps[o] = {clamp(base), clamp(base + 1), static_cast<float>(1.0 - frac),
                   static_cast<float>(frac)};
      }
    }
    return taps;
  }

  // y[o...] = x[tap(o)...]: one index table per axis; rows of the last axis are gathered.
  static void gather_nearest(const Tensor& x, const std::vector<std::vector<Tap>>& taps,
                             Tensor& y) {
    const Shape& in_shape = x.shape();
    const Shape& out_shape = y.shape();
    const std::size_t rank = in_shape.size();
    const Strides in_strides = contiguous_strides(in_shape);
    const std::int64_t row = rank == 0 ? 1 : out_shape.back();
    const std::int64_t rows = y.numel() / row;
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    parallel_for(rows, std::max<std::int64_t>(1, 4096 / row), [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t r = begin; r < end; ++r) {
        std::int64_t rest = r, offset = 0;
        for (std::size_t a = rank - 1; a-- > 0;) {
          offset += taps[a][rest % out_shape[a]].i0 * in_strides[a];
          rest /= out_shape[a];
        }
        const float* src = xp + offset;
        float* dst = yp + r * row;
        if (rank == 0) {
          dst[0] = src[0];
          continue;
        }
        const std::vector<Tap>& last = taps[rank - 1];
        for (std::int64_t o = 0; o < row; ++o) dst[o] = src[last[o].i0];
      }
    });
  }

  // Linear interpolation one axis at a time: [outer, in, inner] -> [outer, out, inner].
  static void interpolate_linear(const Tensor& x, const std::vector<std::vector<Tap>>& taps,
                                 Tensor& y) {
    Tensor current = x;
    Shape shape = x.shape();
    const std::size_t rank = shape.size();
    // Axes whose taps are the identity need no pass.
    std::vector<std::size_t> work;
    for (std::size_t a = 0; a < rank; ++a) {
      bool identity = shape[a] == y.shape()[a];
      for (std::int64_t o = 0; identity && o < y.shape()[a]; ++o) {
        const Tap& t = taps[a][o];
        identity = t.i0 == o && (t.w1 == 0.0f || t.i1 == o);
      }
      if (!identity) work.push_back(a);
    }
    if (work.empty()) {
      std::copy(x.data<float>(), x.data<float>() + x.numel(), y.data<float>());
      return;
    }
    for (std::size_t step = 0; step < work.size(); ++step) {
      const std::size_t a = work[work.size() - 1 - step];  // innermost axis first
      Shape next_shape = shape;
      next_shape[a] = y.shape()[a];
      Tensor next = step + 1 == work.size() ? y : Tensor::empty(DType::kF32, next_shape);
      std::int64_t outer = 1, inner = 1;
      for (std::size_t i = 0; i < a; ++i) outer *= shape[i];
      for (std::size_t i = a + 1; i < rank; ++i) inner *= shape[i];
      const std::int64_t in_len = shape[a], out_len = next_shape[a];
      const float* src = current.data<float>();
      float* dst = next.data<float>();
      const std::vector<Tap>& axis = taps[a];
      parallel_for(outer * out_len, std::max<std::int64_t>(1, 4096 / inner),
                   [&](std::int64_t begin, std::int64_t end) {
                     for (std::int64_t r = begin; r < end; ++r) {
                       const std::int64_t o = r / out_len, j = r % out_len;
                       const Tap t = axis[j];
                       const float* s0 = src + (o * in_len + t.i0) * inner;
                       const float* s1 = src + (o * in_len + t.i1) * inner;
                       float* d = dst + r * inner;
                       for (std::int64_t i = 0; i < inner; ++i) d[i] = t.w0 * s0[i] + t.w1 * s1[i];
                     }
                   });
      current = next;
      shape = next_shape;
    }
  }

  std::int64_t opset_;
  Mode mode_ = Mode::kNearest;
  Transform transform_ = Transform::kHalfPixel;
  Nearest nearest_ = Nearest::kRoundPreferFloor;
  std::vector<std::int64_t> axes_;
};

}  // namespace

RW_REGISTER_KERNEL("Resize", Device::kCpu, make_factory<ResizeKernel>());

}  // namespace redwood::cpu
