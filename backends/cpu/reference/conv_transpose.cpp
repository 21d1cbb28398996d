// ConvTranspose (ONNX opsets 1-22): the gradient of Conv with respect to its input, over 1, 2 or
// 3 spatial axes, with groups, strides, dilations, pads, output_padding, output_shape, auto_pad.
//
// Per (image, group), a GEMM spreads every input pixel over the window:
//     col[(oc, tap), pixel] = sum over ic of W[ic, oc, tap] * X[ic, pixel]
// then col2im adds each column entry into the output position its tap lands on:
//     Y[oc, pixel * stride - pad_begin + tap * dilation] += col[(oc, tap), pixel]
// Output positions outside [0, out) are cropped (the pads); positions no tap reaches (an
// output_shape larger than the data covers) keep the bias. A fused epilogue (epilogue.hpp) comes last.

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

// Adds the columns of `channels` output planes (rows (c, kd, kh, kw) of col, one entry per input
// pixel) into y. Each task owns whole output channels, so no two write the same element.
void col2im(const float* col, const Axes3& a, std::int64_t channels, float* y) {
  const std::int64_t in_plane = a[0].in * a[1].in * a[2].in;
  const std::int64_t out_plane = a[0].out * a[1].out * a[2].out;
  const std::int64_t taps = a[0].kernel * a[1].kernel * a[2].kernel;
  parallel_for(channels, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t c = begin; c < end; ++c) {
      float* dst = y + c * out_plane;
      for (std::int64_t tap = 0; tap < taps; ++tap) {
        const std::int64_t kd = tap / (a[1].kernel * a[2].kernel);
        const std::int64_t kh = tap / a[2].kernel % a[1].kernel;
        const std::int64_t kw = tap % a[2].kernel;
        const float* src = col + (c * taps + tap) * in_plane;
        const std::int64_t w_offset = kw * a[2].dilation - a[2].pad_begin;
        const auto [lo, hi] = nn::valid_range(a[2].in, a[2].out, a[2].stride, w_offset);
        const std::int64_t sw = a[2].stride;
        for (std::int64_t id = 0; id < a[0].in; ++id) {
          const std::int64_t od = id * a[0].stride - a[0].pad_begin + kd * a[0].dilation;
          if (od < 0 || od >= a[0].out) continue;
          for (std::int64_t ih = 0; ih < a[1].in; ++ih) {
            const std::int64_t oh = ih * a[1].stride - a[1].pad_begin + kh * a[1].dilation;
            if (oh < 0 || oh >= a[1].out) continue;
            float* out_row = dst + (od * a[1].out + oh) * a[2].out;
            const float* in_row = src + (id * a[1].in + ih) * a[2].in;
            for (std::int64_t iw = lo; iw < hi; ++iw) out_row[iw * sw + w_offset] += in_row[iw];
          }
        }
      }
    }
  });
}

class ConvTransposeKernel final : public Kernel {
 public:
  ConvTransposeKernel(const Node& node, const KernelInfo& info)
      : window_(nn::parse_window(node, /*read_ceil_mode=*/false)),
        group_(node.attr_int("group", 1)),
        output_padding_(node.attr_ints("output_padding")),
        output_shape_(node.attr_ints("output_shape")),
        epilogue_(Epilogue::from_node(node)) {
    nn::check_conv_node(node, info, group_);
    for (std::int64_t p : output_padding_) {
      RW_EXPECTS(p >= 0, InvalidArgument, "{}: output_padding must not be negative, got [{}]",
                 node.where(), fmt::join(output_padding_, ", "));
    }
  }

  void run(KernelContext& ctx) override {
    compute(ctx);
    finish_epilogue(ctx, epilogue_, ctx.outputs[0]);
  }

 private:
  void compute(KernelContext& ctx) {
    const Node& node = ctx.node;
    const auto [x, w, b] = nn::read_conv_operands(ctx);
    // Shapes: X [N, Cin, spatial...], W [Cin, Cout/group, kernel...], B [Cout].
    const std::size_t spatial = static_cast<std::size_t>(x.rank() - 2);
    nn::check_window_rank(node, window_, spatial, x.shape());
    const std::int64_t batch = x.dim(0), cin = x.dim(1);
    RW_EXPECTS(cin % group_ == 0 && w.dim(0) == cin, InvalidArgument,
               "{}: X {} and W {} do not match for group {} (W must be [Cin, Cout/group, ...] "
               "with Cin divisible by group)",
               node.where(), shape_str(x.shape()), shape_str(w.shape()), group_);
    const std::int64_t cout_g = w.dim(1), cin_g = cin / group_, cout = cout_g * group_;
    std::vector<std::int64_t> kernel(w.shape().begin() + 2, w.shape().end());
    if (!window_.kernel_shape.empty()) {
      RW_EXPECTS(window_.kernel_shape == kernel, InvalidArgument,
                 "{}: kernel_shape [{}] does not match W {}", node.where(),
                 fmt::join(window_.kernel_shape, ", "), shape_str(w.shape()));
    }
    if (b.defined()) {
      RW_EXPECTS(b.rank() == 1 && b.dim(0) == cout, InvalidArgument,
                 "{}: B {} must be [{}] for W {} and group {}", node.where(), shape_str(b.shape()),
                 cout, shape_str(w.shape()), group_);
    }
    const Axes3 a = resolve(node, x.shape(), kernel);

    Shape out_shape{batch, cout};
    for (std::size_t i = 0; i < spatial; ++i) out_shape.push_back(a[nn::kMaxSpatial - spatial + i].out);
    Tensor y = ctx.allocate_output(0, DType::kF32, out_shape);
    ctx.outputs[0] = y;
    if (y.numel() == 0) return;

    const std::int64_t in_plane = a[0].in * a[1].in * a[2].in;
    const std::int64_t out_plane = a[0].out * a[1].out * a[2].out;
    const std::int64_t taps = a[0].kernel * a[1].kernel * a[2].kernel;
    const float* xp = x.data<float>();
    const float* wp = w.data<float>();
    const float* bp = b.defined() ? b.data<float>() : nullptr;
    float* yp = y.data<float>();

    for (std::int64_t p = 0; p < batch * cout; ++p) {
      std::fill(yp + p * out_plane, yp + (p + 1) * out_plane, bp ? bp[p % cout] : 0.0f);
    }
    if (x.numel() == 0 || taps == 0) return;

    // W's group block is [cin_g, cout_g * taps]; its transpose times X's group block is col.
    const std::int64_t rows = cout_g * taps;
    std::unique_ptr<float[]> col(new float[static_cast<std::size_t>(rows * in_plane)]);
    for (std::int64_t n = 0; n < batch; ++n) {
      for (std::int64_t g = 0; g < group_; ++g) {
        sgemm(true, false, rows, in_plane, cin_g, 1.0f, wp + g * cin_g * rows, rows,
              xp + (n * cin + g * cin_g) * in_plane, in_plane, 0.0f, col.get(), in_plane);
        col2im(col.get(), a, cout_g, yp + (n * cout + g * cout_g) * out_plane);
      }
    }
  }

 private:
  // Output extents and padding, per the ONNX spec:
  //   full  = stride * (in - 1) + output_padding + (kernel - 1) * dilation + 1
  //   out   = output_shape if given; in * stride for SAME_*; else full - pad_begin - pad_end
  //   total = full - out is split between the two ends; the odd pixel is cropped at the end for
  //           SAME_UPPER and at the beginning otherwise. A negative total (output_shape larger
  //           than full) leaves the extra positions at the end with the bias only.
  nn::Axes3 resolve(const Node& node, const Shape& x_shape,
                    const std::vector<std::int64_t>& kernel) const {
    const std::size_t spatial = kernel.size();
    auto check_len = [&](const std::vector<std::int64_t>& v, const char* name) {
      RW_EXPECTS(v.empty() || v.size() == spatial, InvalidArgument,
                 "{}: {} has {} values but X {} has {} spatial axes", node.where(), name, v.size(),
                 shape_str(x_shape), spatial);
    };
    check_len(output_padding_, "output_padding");
    // output_shape may also be given with the batch and channel extents in front.
    std::vector<std::int64_t> output_shape = output_shape_;
    if (output_shape.size() == spatial + 2) output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
    check_len(output_shape, "output_shape");

    nn::Axes3 axes{};
    const std::size_t offset = nn::kMaxSpatial - spatial;
    for (std::size_t i = 0; i < spatial; ++i) {
      nn::Axis& ax = axes[offset + i];
      ax.in = x_shape[2 + i];
      ax.kernel = kernel[i];
      ax.stride = nn::attr_at(window_.strides, i, 1);
      ax.dilation = nn::attr_at(window_.dilations, i, 1);
      const std::int64_t full =
          ax.stride * (ax.in - 1) + nn::attr_at(output_padding_, i, 0) + ax.extent();
      const bool same = window_.auto_pad == nn::AutoPad::kSameUpper ||
                        window_.auto_pad == nn::AutoPad::kSameLower;
      if (!output_shape.empty() || same) {
        ax.out = !output_shape.empty() ? output_shape[i] : ax.in * ax.stride;
        const std::int64_t total = std::max<std::int64_t>(0, full - ax.out);
        ax.pad_begin = window_.auto_pad == nn::AutoPad::kSameUpper ? total / 2 : total - total / 2;
      } else if (window_.auto_pad == nn::AutoPad::kValid) {
        ax.out = full;
      } else {
        ax.pad_begin = nn::attr_at(window_.pads, i, 0);
        ax.out = full - ax.pad_begin - nn::attr_at(window_.pads, spatial + i, 0);
      }
      ax.pad_end = full - ax.out - ax.pad_begin;
      RW_EXPECTS(ax.out >= 0, InvalidArgument,
                 "{}: the pads leave a negative output extent ({}) along spatial axis {} of X {}",
                 node.where(), ax.out, i, shape_str(x_shape));
    }
    return axes;
  }

  nn::WindowAttrs window_;
  std::int64_t group_;
  std::vector<std::int64_t> output_padding_;
  std::vector<std::int64_t> output_shape_;
  Epilogue epilogue_;
};

}  // namespace

RW_REGISTER_KERNEL("ConvTranspose", Device::kCpu, make_factory<ConvTransposeKernel>());

}  // namespace redwood::cpu
