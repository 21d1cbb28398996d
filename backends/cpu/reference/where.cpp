// Where(condition, X, Y): X where the condition holds, else Y, with numpy (multidirectional)
// broadcasting of all three. The condition is bool; X and Y have one type, any Redwood holds,
// which is the output's. Opset 9 and 16 differ only in the types they admit (16 adds bfloat16).

#include "backends/cpu/reference/ew_broadcast.hpp"
#include "backends/cpu/reference/ew_operands.hpp"

#include <cstdint>

namespace redwood::cpu {
namespace {

class WhereKernel final : public Kernel {
 public:
  WhereKernel(const Node& node, const KernelInfo& info) {
    expect_input_count(node, 3);
    if (!info.input_dtypes.empty()) {
      expect_dtype(node, info.input_dtypes[0], {DType::kBool}, "condition");
    }
    expect_same_typed_inputs(node, info, 1,
                             {DType::kF32, DType::kF16, DType::kBF16, DType::kI64, DType::kI32,
                              DType::kU8, DType::kBool});
  }

  void run(KernelContext& ctx) override {
    const std::vector<Tensor> in = contiguous_inputs(ctx, 1, 3);
    RW_EXPECTS(in[0].dtype() == DType::kBool, InvalidArgument, "{}: condition is {}, not bool",
               ctx.node.where(), in[0].description());
    Tensor out = allocate_broadcast_output(ctx, in[1].dtype(), in);
    dispatch<float, Half, BFloat16, std::int64_t, std::int32_t, std::uint8_t, bool>(
        in[1].dtype(), ctx.node, [&](auto tag) {
          using T = decltype(tag);
          detail::broadcast_ternary<bool, T, T, T>(in[0], in[1], in[2], out,
                                                   [](bool c, T x, T y) { return c ? x : y; });
        });
    ctx.outputs[0] = std::move(out);
  }
};

}  // namespace

RW_REGISTER_KERNEL("Where", Device::kCpu, make_factory<WhereKernel>());

}  // namespace redwood::cpu
