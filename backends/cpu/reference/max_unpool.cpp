// MaxUnpool (ONNX opsets 9, 11 and 22): the partial inverse of MaxPool. Y is zeros except at the
// flat positions I, which receive the values of X; I is as MaxPool's Indices output gives it
// (row-major over the whole unpooled [N, C, spatial...] tensor), one per element of X.
//
// The unpooled extent of each spatial axis is (in - 1) * stride - pad_begin - pad_end + kernel
// (kernel_shape, strides, pads; 1 to 3 spatial axes). Opset 11's optional output_shape input
// makes Y that shape instead, at least the unpooled one along every axis, with the unpooled
// tensor in its leading corner and zeros after it (as the ONNX reference does). Where I names a
// position twice, the later element of X wins.

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/nn_common.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace redwood::cpu {
namespace {

class MaxUnpoolKernel final : public Kernel {
 public:
  MaxUnpoolKernel(const Node& node, const KernelInfo& info)
      : window_(nn::parse_window(node, /*read_ceil_mode=*/false)) {
    const auto dtype = [&](std::size_t i) {
      return i < info.input_dtypes.size() ? info.input_dtypes[i] : DType::kUndefined;
    };
    expect_dtype(node, dtype(0), {DType::kF32}, "X");
    expect_dtype(node, dtype(1), {DType::kI64}, "I");
    expect_dtype(node, dtype(2), {DType::kI64}, "output_shape");
    RW_EXPECTS(!window_.kernel_shape.empty(), InvalidArgument,
               "{}: the kernel_shape attribute is required", node.where());
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor x = ctx.input(0).contiguous();
    const Tensor indices = ctx.input(1).contiguous();
    nn::expect_f32(node, x, "X");
    RW_EXPECTS(x.rank() >= 3, InvalidArgument, "{}: X {} must be [N, C, spatial...]", node.where(),
               x.description());
    RW_EXPECTS(indices.dtype() == DType::kI64 && indices.shape() == x.shape(), InvalidArgument,
               "{}: I {} must be int64 of the shape of X {}", node.where(), indices.description(),
               x.description());
    const std::size_t spatial = static_cast<std::size_t>(x.rank() - 2);
    nn::check_window_rank(node, window_, spatial, x.shape());

    Shape unpooled{x.dim(0), x.dim(1)};
    for (std::size_t i = 0; i < spatial; ++i) {
      const std::int64_t extent = (x.dim(std::int64_t(i) + 2) - 1) * nn::attr_at(window_.strides, i, 1) -
                                  nn::attr_at(window_.pads, i, 0) -
                                  nn::attr_at(window_.pads, spatial + i, 0) + window_.kernel_shape[i];
      RW_EXPECTS(extent >= 0, InvalidArgument,
                 "{}: the pads leave spatial axis {} of the unpooled X {} {} long", node.where(),
                 i, x.description(), extent);
      unpooled.push_back(extent);
    }
    Shape out_shape = unpooled;
    if (ctx.has_input(2)) {
      const Tensor& given = ctx.input(2);
      RW_EXPECTS(given.dtype() == DType::kI64 && given.rank() == 1, InvalidArgument,
                 "{}: output_shape {} must be a 1-D int64 tensor", node.where(), given.description());
      out_shape = given.to_int64_vector();
      RW_EXPECTS(out_shape.size() == unpooled.size(), InvalidArgument,
                 "{}: output_shape {} must have the rank of X {}", node.where(),
                 shape_str(out_shape), x.description());
      for (std::size_t d = 0; d < out_shape.size(); ++d) {
        RW_EXPECTS(out_shape[d] >= unpooled[d], InvalidArgument,
                   "{}: output_shape {} is smaller than the unpooled shape {}", node.where(),
                   shape_str(out_shape), shape_str(unpooled));
      }
    }

    Tensor y = ctx.allocate_output(0, DType::kF32, out_shape);
    ctx.outputs[0] = y;
    float* yp = y.data<float>();
    std::fill(yp, yp + y.numel(), 0.0f);
    const float* xp = x.data<float>();
    const std::int64_t* ip = indices.data<std::int64_t>();
    const std::int64_t limit = shape_numel(unpooled);
    const bool same = out_shape == unpooled;
    const Strides from = contiguous_strides(unpooled), to = contiguous_strides(out_shape);
    // Serial: positions named twice must keep the later value.
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      const std::int64_t at = ip[i];
      RW_EXPECTS(at >= 0 && at < limit, InvalidArgument,
                 "{}: index {} (element {} of I) is outside the unpooled shape {}", node.where(),
                 at, i, shape_str(unpooled));
      std::int64_t offset = at;
      if (!same) {
        offset = 0;
        for (std::size_t d = 0; d < unpooled.size(); ++d) offset += at / from[d] % unpooled[d] * to[d];
      }
      yp[offset] = xp[i];
    }
  }

 private:
  nn::WindowAttrs window_;
};

}  // namespace

RW_REGISTER_KERNEL("MaxUnpool", Device::kCpu, make_factory<MaxUnpoolKernel>());

}  // namespace redwood::cpu
