// Conv (ONNX opsets 1-22): Y = X * W + B over 1, 2 or 3 spatial axes, with groups, strides,
// dilations, explicit pads or auto_pad.
//
// Three paths, all giving the same result up to float rounding:
//   - depthwise (one input channel per group): a direct loop per output plane, whose inner loop
//     runs over the part of an output row where the tap is inside the input;
//   - pointwise (1x1 kernel, stride 1, no padding): the input planes of a group already are the
//     K x pixels matrix, so one GEMM per (image, group);
//   - otherwise im2col: the window's taps become the rows of a (Cin/group * kernel) x pixels
//     matrix, then a GEMM with the group's weights; per (image, group), one band of output
//     lines at a time, so that the matrix stays small enough to be read back from cache.
// The bias is written into the output first and the GEMM accumulates onto it (beta = 1); a fused
// epilogue (epilogue.hpp: residual, activation) is applied last.

#include "backends/cpu/reference/gemm_kernel.hpp"
#include "backends/cpu/reference/epilogue.hpp"
#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/nn_common.hpp"

#include <algorithm>
#include <memory>
#include <vector>

namespace redwood::cpu {
namespace {

using nn::Axes3;

// Writes the im2col matrix of `channels` input planes for the output lines [line_begin,
// line_end) (a line is one (od, oh): a[2].out pixels): row (c, kd, kh, kw) of `col` holds, for
// each of those pixels, the input value under that tap (0 in the padding).
void im2col(const float* x, const Axes3& a, std::int64_t channels, std::int64_t line_begin,
            std::int64_t line_end, float* col) {
  const std::int64_t in_plane = a[0].in * a[1].in * a[2].in;
  const std::int64_t width = (line_end - line_begin) * a[2].out;  // pixels per row of col
  const std::int64_t taps = a[0].kernel * a[1].kernel * a[2].kernel;
  const std::int64_t rows = channels * taps;
  const std::int64_t grain = std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(1, width));
  parallel_for(rows, grain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t row = begin; row < end; ++row) {
      const std::int64_t c = row / taps;
      const std::int64_t tap = row % taps;
      const std::int64_t kd = tap / (a[1].kernel * a[2].kernel);
      const std::int64_t kh = tap / a[2].kernel % a[1].kernel;
      const std::int64_t kw = tap % a[2].kernel;
      const float* src = x + c * in_plane;
      float* dst = col + row * width;
      const std::int64_t w_offset = kw * a[2].dilation - a[2].pad_begin;
      const auto [w_lo, w_hi] = nn::valid_range(a[2].out, a[2].in, a[2].stride, w_offset);
      const std::int64_t sw = a[2].stride;
      for (std::int64_t line = line_begin; line < line_end; ++line) {
        const std::int64_t od = line / a[1].out, oh = line % a[1].out;
        const std::int64_t id = od * a[0].stride - a[0].pad_begin + kd * a[0].dilation;
        const std::int64_t ih = oh * a[1].stride - a[1].pad_begin + kh * a[1].dilation;
        float* out_row = dst + (line - line_begin) * a[2].out;
        if (id < 0 || id >= a[0].in || ih < 0 || ih >= a[1].in) {
          std::fill(out_row, out_row + a[2].out, 0.0f);
          continue;
        }
        const float* in_row = src + (id * a[1].in + ih) * a[2].in;
        std::fill(out_row, out_row + w_lo, 0.0f);
        if (sw == 1) {
          for (std::int64_t ow = w_lo; ow < w_hi; ++ow) out_row[ow] = in_row[ow + w_offset];
        } else {
          for (std::int64_t ow = w_lo; ow < w_hi; ++ow) out_row[ow] = in_row[ow * sw + w_offset];
        }
        std::fill(out_row + w_hi, out_row + a[2].out, 0.0f);
      }
    }
  });
}

// One output plane of a depthwise convolution, accumulated onto `dst` (which holds the bias).
void depthwise_plane(const float* src, const float* weights, const Axes3& a, float* dst) {
  const std::int64_t sw = a[2].stride;
  for (std::int64_t od = 0; od < a[0].out; ++od) {
    for (std::int64_t oh = 0; oh < a[1].out; ++oh) {
      float* __restrict out_row = dst + (od * a[1].out + oh) * a[2].out;
      for (std::int64_t kd = 0; kd < a[0].kernel; ++kd) {
        const std::int64_t id = od * a[0].stride - a[0].pad_begin + kd * a[0].dilation;
        if (id < 0 || id >= a[0].in) continue;
        for (std::int64_t kh = 0; kh < a[1].kernel; ++kh) {
          const std::int64_t ih = oh * a[1].stride - a[1].pad_begin + kh * a[1].dilation;
          if (ih < 0 || ih >= a[1].in) continue;
          const float* row_base = src + (id * a[1].in + ih) * a[2].in;
          for (std::int64_t kw = 0; kw < a[2].kernel; ++kw) {
            const float wv = weights[(kd * a[1].kernel + kh) * a[2].kernel + kw];
            const std::int64_t offset = kw * a[2].dilation - a[2].pad_begin;
            const auto [lo, hi] = nn::valid_range(a[2].out, a[2].in, sw, offset);
            const float* __restrict in_row = row_base;
            if (sw == 1) {
              for (std::int64_t ow = lo; ow < hi; ++ow) out_row[ow] += wv * in_row[ow + offset];
            } else {
              for (std::int64_t ow = lo; ow < hi; ++ow) out_row[ow] += wv * in_row[ow * sw + offset];
            }
          }
        }
      }
    }
  }
}

class ConvKernel final : public Kernel {
 public:
  ConvKernel(const Node& node, const KernelInfo& info)
      : window_(nn::parse_window(node, /*read_ceil_mode=*/false)),
        group_(node.attr_int("group", 1)),
        epilogue_(Epilogue::from_node(node)) {
    nn::check_conv_node(node, info, group_);
  }

  void run(KernelContext& ctx) override {
    compute(ctx);
    finish_epilogue(ctx, epilogue_, ctx.outputs[0]);
  }

 private:
  void compute(KernelContext& ctx) {
    const Node& node = ctx.node;
    const auto [x, w, b] = nn::read_conv_operands(ctx);
    // Shapes: X [N, Cin, spatial...], W [Cout, Cin/group, kernel...], B [Cout].
    const std::size_t spatial = static_cast<std::size_t>(x.rank() - 2);
    nn::check_window_rank(node, window_, spatial, x.shape());
    const std::int64_t batch = x.dim(0), cin = x.dim(1), cout = w.dim(0);
    RW_EXPECTS(cin % group_ == 0 && cout % group_ == 0 && w.dim(1) * group_ == cin, InvalidArgument,
               "{}: X {} and W {} do not match for group {} (W must be [Cout, Cin/group, ...] "
               "with Cin and Cout divisible by group)",
               node.where(), shape_str(x.shape()), shape_str(w.shape()), group_);
    std::vector<std::int64_t> in(x.shape().begin() + 2, x.shape().end());
    std::vector<std::int64_t> kernel(w.shape().begin() + 2, w.shape().end());
    if (!window_.kernel_shape.empty()) {
      RW_EXPECTS(window_.kernel_shape == kernel, InvalidArgument,
                 "{}: kernel_shape [{}] does not match W {}", node.where(),
                 fmt::join(window_.kernel_shape, ", "), shape_str(w.shape()));
    }
    if (b.defined()) {
      RW_EXPECTS(b.rank() == 1 && b.dim(0) == cout, InvalidArgument,
                 "{}: B {} must be [{}] for W {}", node.where(), shape_str(b.shape()), cout,
                 shape_str(w.shape()));
    }
    const Axes3 a = nn::resolve_forward(node, window_, in, kernel, x.shape());

    Shape out_shape{batch, cout};
    for (std::size_t i = 0; i < spatial; ++i) out_shape.push_back(a[nn::kMaxSpatial - spatial + i].out);
    Tensor y = ctx.allocate_output(0, DType::kF32, out_shape);
    ctx.outputs[0] = y;
    if (y.numel() == 0) return;

    const std::int64_t in_plane = a[0].in * a[1].in * a[2].in;
    const std::int64_t out_plane = a[0].out * a[1].out * a[2].out;
    const std::int64_t taps = a[0].kernel * a[1].kernel * a[2].kernel;
    const std::int64_t cin_g = cin / group_, cout_g = cout / group_;
    const float* xp = x.data<float>();
    const float* wp = w.data<float>();
    const float* bp = b.defined() ? b.data<float>() : nullptr;
    float* yp = y.data<float>();

    // Output planes start as the bias (or zero): every path below accumulates onto them.
    parallel_for(batch * cout, std::max<std::int64_t>(1, 16384 / out_plane),
                 [&](std::int64_t begin, std::int64_t end) {
                   for (std::int64_t p = begin; p < end; ++p) {
                     std::fill(yp + p * out_plane, yp + (p + 1) * out_plane,
                               bp ? bp[p % cout] : 0.0f);
                   }
                 });
    if (x.numel() == 0 || taps == 0) return;

    if (cin_g == 1) {
      // Depthwise (possibly with a channel multiplier): output channel oc reads input channel
      // oc / cout_g with the weights of W[oc].
      parallel_for(batch * cout, 1, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t p = begin; p < end; ++p) {
          const std::int64_t n = p / cout, oc = p % cout;
          depthwise_plane(xp + (n * cin + oc / cout_g) * in_plane, wp + oc * taps, a,
                          yp + p * out_plane);
        }
      });
      return;
    }

    const bool pointwise = taps == 1 && std::all_of(a.begin(), a.end(), [](const nn::Axis& ax) {
      return ax.stride == 1 && ax.pad_begin == 0 && ax.pad_end == 0;
    });
    const std::int64_t k = cin_g * taps;
    if (pointwise) {
      for (std::int64_t n = 0; n < batch; ++n) {
        for (std::int64_t g = 0; g < group_; ++g) {
          sgemm(false, false, cout_g, out_plane, k, 1.0f, wp + g * cout_g * k, k,
                xp + (n * cin + g * cin_g) * in_plane, out_plane, 1.0f,
                yp + (n * cout + g * cout_g) * out_plane, out_plane);
        }
      }
      return;
    }

    // The im2col matrix is built a band of output lines at a time, about kColFloats floats, and
    // consumed while it is still in cache. (A whole 160 x 160 image with K = 864 would be 88 MB:
    // writing it costs more in page faults than the product costs in arithmetic.) The band
    // stays wide enough (kMinBandPixels) for the GEMM to split over the workers.
    constexpr std::int64_t kColFloats = std::int64_t{1} << 20;
    constexpr std::int64_t kMinBandPixels = 1024;
    const std::int64_t lines = a[0].out * a[1].out, width = a[2].out;
    const std::int64_t band = std::clamp<std::int64_t>(
        std::max(kColFloats / (k * width), (kMinBandPixels + width - 1) / width), 1, lines);
    std::unique_ptr<float[]> col(new float[static_cast<std::size_t>(k * band * width)]);
    for (std::int64_t n = 0; n < batch; ++n) {
      for (std::int64_t g = 0; g < group_; ++g) {
        const float* x_group = xp + (n * cin + g * cin_g) * in_plane;
        float* y_group = yp + (n * cout + g * cout_g) * out_plane;
        for (std::int64_t line = 0; line < lines; line += band) {
          const std::int64_t line_end = std::min(lines, line + band);
          const std::int64_t pixels = (line_end - line) * width;
          im2col(x_group, a, cin_g, line, line_end, col.get());
          sgemm(false, false, cout_g, pixels, k, 1.0f, wp + g * cout_g * k, k, col.get(), pixels,
                1.0f, y_group + line * width, out_plane);
        }
      }
    }
  }

 private:
  nn::WindowAttrs window_;
  std::int64_t group_;
  Epilogue epilogue_;
};

}  // namespace

RW_REGISTER_KERNEL("Conv", Device::kCpu, make_factory<ConvKernel>());

}  // namespace redwood::cpu
