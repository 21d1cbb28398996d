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

  std::vector<std::int64_t> raw(const KernelContext& ctx) const {
    return from_input_ ? ctx.inputs[1].to_int64_vector() : attr_;
  }

  std::vector<std::int64_t> normalized(const KernelContext& ctx, std::vector<std::int64_t> axes,
                                       std::int64_t rank) const {
    std::vector<bool> seen(static_cast<std::size_t>(rank), false);
    for (std::int64_t& a : axes) {
      RW_EXPECTS(a >= -rank && a < rank, InvalidArgument, "{}: axis {} is out of range for rank {}",
                 ctx.node.where(), a, rank);
      if (a < 0) a += rank;
      RW_EXPECTS(!seen[a], InvalidArgument, "{}: axis {} is repeated", ctx.node.where(), a);
      seen[a] = true;
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
    std::vector<bool> drop(static_cast<std::size_t>(x.rank()), false);
    if (axes_.present(ctx)) {
      for (std::int64_t a : axes_.normalized(ctx, axes_.raw(ctx), x.rank())) {
        RW_EXPECTS(x.shape()[a] == 1, InvalidArgument,
                   "{}: cannot squeeze axis {} of {}: its extent is not 1", ctx.node.where(), a,
                   x.description());
        drop[a] = true;
      }
    } else {
      for (std::size_t d = 0; d < drop.size(); ++d) drop[d] = x.shape()[d] == 1;
    }
    Shape shape;
    for (std::size_t d = 0; d < drop.size(); ++d) {
      if (!drop[d]) shape.push_back(x.shape()[d]);
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
    std::vector<std::int64_t> axes = axes_.raw(ctx);
    const std::int64_t out_rank = x.rank() + static_cast<std::int64_t>(axes.size());
    axes = axes_.normalized(ctx, std::move(axes), out_rank);
    std::vector<bool> inserted(static_cast<std::size_t>(out_rank), false);
    for (std::int64_t a : axes) inserted[a] = true;
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
