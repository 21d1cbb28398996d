// CastLike (opset 15): Cast to the type of the second input (whose values are not read), with
// Cast's conversions (cast.hpp). A target type Redwood does not hold (double, string) fails at load,
// as the model's input of that type does.

#include "backends/cpu/reference/cast.hpp"
#include "backends/cpu/reference/kernel_util.hpp"

namespace redwood::cpu {
namespace {

class CastLikeKernel final : public Kernel {
 public:
  CastLikeKernel(const Node& node, const KernelInfo&) {
    RW_EXPECTS(node.has_input(1), InvalidArgument,
               "{}: CastLike takes an input and a tensor of the target type", node.where());
  }

  void run(KernelContext& ctx) override {
    ctx.outputs[0] = cast_to(ctx, ctx.input(0), ctx.input(1).dtype());
  }
};

}  // namespace

RW_REGISTER_KERNEL("CastLike", Device::kCpu, make_factory<CastLikeKernel>());

}  // namespace redwood::cpu
