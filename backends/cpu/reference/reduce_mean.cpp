// ReduceMean (ONNX opsets 1-22): the mean over `axes`, keeping them as extent 1 when keepdims
// (default 1).
//   opset < 18: axes is an attribute; absent means every axis (noop_with_empty_axes does not
//               exist yet).
//   opset >= 18: axes is an optional int64 input; absent or empty means every axis, or no
//               reduction at all with noop_with_empty_axes = 1.
// Sums are kept in double, so the mean of a large plane is as exact as the float result can be.

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/nn_common.hpp"

#include <limits>
#include <vector>

namespace redwood::cpu {
namespace {

class ReduceMeanKernel final : public Kernel {
 public:
  ReduceMeanKernel(const Node& node, const KernelInfo& info)
      : axes_from_input_(info.opset >= 18),
        keepdims_(node.attr_int("keepdims", 1) != 0),
        noop_with_empty_axes_(info.opset >= 18 && node.attr_int("noop_with_empty_axes", 0) != 0) {
    expect_dtype(node, info.input_dtypes.empty() ? DType::kUndefined : info.input_dtypes[0],
                 {DType::kF32}, "data");
    if (axes_from_input_) {
      if (info.input_dtypes.size() > 1) {
        expect_dtype(node, info.input_dtypes[1], {DType::kI64}, "axes");
      }
    } else {
      axes_ = node.attr_ints("axes");
    }
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor x = ctx.input(0).contiguous();
    nn::expect_f32(node, x, "data");
    std::vector<std::int64_t> axes = axes_;
    if (axes_from_input_ && ctx.has_input(1)) {
      const Tensor& t = ctx.input(1);
      RW_EXPECTS(t.dtype() == DType::kI64 && t.rank() <= 1, InvalidArgument,
                 "{}: axes {} must be a 1-D int64 tensor", node.where(), t.description());
      axes = t.to_int64_vector();
    }
    if (axes.empty() && noop_with_empty_axes_) {
      ctx.outputs[0] = x;
      return;
    }

    const std::int64_t rank = x.rank();
    std::vector<bool> reduced(static_cast<std::size_t>(rank), axes.empty());
    for (std::int64_t axis : axes) {
      RW_EXPECTS(axis >= -rank && axis < rank, InvalidArgument,
                 "{}: axis {} is out of range for data {}", node.where(), axis,
                 shape_str(x.shape()));
      const std::size_t a = static_cast<std::size_t>(axis < 0 ? axis + rank : axis);
      RW_EXPECTS(!reduced[a], InvalidArgument, "{}: axis {} is listed twice in axes [{}]",
                 node.where(), a, fmt::join(axes, ", "));
      reduced[a] = true;
    }

    Shape out_shape;
    std::int64_t count = 1;
    for (std::int64_t i = 0; i < rank; ++i) {
      if (reduced[i]) {
        count *= x.dim(i);
        if (keepdims_) out_shape.push_back(1);
      } else {
        out_shape.push_back(x.dim(i));
      }
    }
    Tensor y = ctx.allocate_output(0, DType::kF32, out_shape);
    ctx.outputs[0] = y;
    float* yp = y.data<float>();
    if (y.numel() == 0) return;
    if (count == 0) {
      for (std::int64_t i = 0; i < y.numel(); ++i) yp[i] = std::numeric_limits<float>::quiet_NaN();
      return;
    }

    // Runs of neighbouring axes with the same fate merge into one (extent-1 axes drop out), so
    // the data is a few alternating kept/reduced blocks and the innermost one is contiguous.
    struct Block {
      std::int64_t extent;
      bool reduced;
    };
    std::vector<Block> blocks;
    for (std::int64_t i = 0; i < rank; ++i) {
      if (x.dim(i) == 1) continue;
      if (!blocks.empty() && blocks.back().reduced == reduced[i]) {
        blocks.back().extent *= x.dim(i);
      } else {
        blocks.push_back({x.dim(i), reduced[i]});
      }
    }
    if (blocks.empty()) blocks.push_back({1, true});
    // Output stride of each block (0 when reduced); the input is contiguous.
    std::vector<std::int64_t> out_strides(blocks.size());
    std::int64_t stride = 1;
    for (std::size_t b = blocks.size(); b-- > 0;) {
      out_strides[b] = blocks[b].reduced ? 0 : stride;
      if (!blocks[b].reduced) stride *= blocks[b].extent;
    }

    std::vector<double> acc(static_cast<std::size_t>(y.numel()), 0.0);
    const float* xp = x.data<float>();
    const Block inner = blocks.back();
    const std::int64_t outer = x.numel() / inner.extent;
    for (std::int64_t o = 0; o < outer; ++o) {
      std::int64_t rest = o, out_off = 0;
      for (std::size_t b = blocks.size() - 1; b-- > 0;) {
        out_off += rest % blocks[b].extent * out_strides[b];
        rest /= blocks[b].extent;
      }
      const float* src = xp + o * inner.extent;
      if (inner.reduced) {
        double sum = 0.0;
        for (std::int64_t i = 0; i < inner.extent; ++i) sum += src[i];
        acc[out_off] += sum;
      } else {
        double* dst = acc.data() + out_off;
        for (std::int64_t i = 0; i < inner.extent; ++i) dst[i] += src[i];
      }
    }
    for (std::size_t i = 0; i < acc.size(); ++i) yp[i] = static_cast<float>(acc[i] / double(count));
  }

 private:
  bool axes_from_input_;
  bool keepdims_;
  bool noop_with_empty_axes_;
  std::vector<std::int64_t> axes_;
};

}  // namespace

RW_REGISTER_KERNEL("ReduceMean", Device::kCpu, make_factory<ReduceMeanKernel>());

}  // namespace redwood::cpu
