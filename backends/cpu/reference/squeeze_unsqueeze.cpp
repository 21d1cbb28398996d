// Squeeze and Unsqueeze: remove or insert extent-1 dimensions; the output views the input's
// storage. Axes come from the `axes` attribute before opset 13 and from an int64 input from
// opset 13. Squeeze without axes removes every extent-1 dimension; naming an axis whose extent
// is not 1 is an error.

#include "backends/cpu/reference/kernel_util.hpp"

namespace redwood::cpu {
namespace {

/// Reads the axes (attribute or input) and normalizes them against `rank`, rejecting repeats.
class AxesSource {
 public:
  AxesSource(const Node& node, const KernelInfo& info) : from_input_(info.opset >= 13) {
    if (from_input_) {
      if (info.input_dtypes.size() > 1) {
        expect_dtype(node, info.input_dtypes[1], {DType::kI64, DType::kI32}, "axes");
      }
    } else {
      RW_EXPECTS(node.inputs.size() <= 1, InvalidArgument,
                 "{}: {} before opset 13 takes one input ('axes' is an attribute)", node.where(),
                 node.op_type);
      has_attr_ = node.has_attr("axes");
      attr_ = node.attr_ints("axes");
    }
  }

  bool present(const KernelContext& ctx) const {
    return from_input_ ? ctx.has_input(1) : has_attr_;
  }

  /// The axes as given, in a Shape (in place for up to eight: these run on every batch).
  Shape raw(const KernelContext& ctx) const {
    if (!from_input_) return Shape(attr_.begin(), attr_.end());
    const Tensor& t = ctx.inputs[1];
    if (t.dtype() != DType::kI64) return Shape(t.to_int64_vector());
    const Tensor c = t.contiguous();
    return Shape(c.data<std::int64_t>(), c.data<std::int64_t>() + c.numel());
  }

  /// `axes` normalized against `rank` (negative ones counted from the back), repeats rejected.
  Shape normalized(const KernelContext& ctx, Shape axes, std::int64_t rank) const {
    for (std::size_t i = 0; i < axes.size(); ++i) {
      std::int64_t& a = axes[i];
      RW_EXPECTS(a >= -rank && a < rank, InvalidArgument, "{}: axis {} is out of range for rank {}",
                 ctx.node.where(), a, rank);
      if (a < 0) a += rank;
      for (std::size_t j = 0; j < i; ++j) {
        RW_EXPECTS(axes[j] != a, InvalidArgument, "{}: axis {} is repeated", ctx.node.where(), a);
      }
    }
    return axes;
  }

 private:
  bool from_input_;
  bool has_attr_ = false;
  std::vector<std::int64_t> attr_;
};

class SqueezeKernel final : public Kernel {
 public:
  SqueezeKernel(const Node& node, const KernelInfo& info) : axes_(node, info) {}

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    Shape drop(static_cast<std::size_t>(x.rank()), 0);  // 1: the axis goes (a Shape: no allocation)
    if (axes_.present(ctx)) {
      for (std::int64_t a : axes_.normalized(ctx, axes_.raw(ctx), x.rank())) {
        RW_EXPECTS(x.shape()[a] == 1, InvalidArgument,
                   "{}: cannot squeeze axis {} of {}: its extent is not 1", ctx.node.where(), a,
                   x.description());
        drop[a] = 1;
      }
    } else {
      for (std::size_t d = 0; d < drop.size(); ++d) drop[d] = x.shape()[d] == 1;
    }
    Shape shape;
    for (std::size_t d = 0; d < drop.size(); ++d) {
      if (drop[d] == 0) shape.push_back(x.shape()[d]);
    }
    ctx.outputs[0] = x.contiguous().reshaped(std::move(shape));
  }

 private:
  AxesSource axes_;
};

class UnsqueezeKernel final : public Kernel {
 public:
  UnsqueezeKernel(const Node& node, const KernelInfo& info) : axes_(node, info) {
    RW_EXPECTS(info.opset >= 13 || node.has_attr("axes"), InvalidArgument,
               "{}: attribute 'axes' is required", node.where());
  }

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    RW_EXPECTS(axes_.present(ctx), InvalidArgument, "{}: input 'axes' is required",
               ctx.node.where());
    // Axes index the output, whose rank is the input's plus the number of axes.
    Shape axes = axes_.raw(ctx);
    const std::int64_t out_rank = x.rank() + static_cast<std::int64_t>(axes.size());
    axes = axes_.normalized(ctx, std::move(axes), out_rank);
    Shape inserted(static_cast<std::size_t>(out_rank), 0);  // 1: a new axis
    for (std::int64_t a : axes) inserted[a] = 1;
    Shape shape;
    std::size_t next = 0;  // next input dimension
    for (std::size_t d = 0; d < inserted.size(); ++d) {
      shape.push_back(inserted[d] ? 1 : x.shape()[next++]);
    }
    ctx.outputs[0] = x.contiguous().reshaped(std::move(shape));
  }

 private:
  AxesSource axes_;
};

}  // namespace

RW_REGISTER_KERNEL("Squeeze", Device::kCpu, make_factory<SqueezeKernel>());
RW_REGISTER_KERNEL("Unsqueeze", Device::kCpu, make_factory<UnsqueezeKernel>());

}  // namespace redwood::cpu
