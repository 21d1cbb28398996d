// Comparisons and logical ops with numpy (multidirectional) broadcasting; the output is bool.
//
// Equal, Less, Greater (opsets 7 to 13) and LessOrEqual, GreaterOrEqual (12, 16) compare two
// inputs of one type: float, int64, int32, uint8, and also bool for Equal. Floats compare as
// IEEE 754 does: NaN equals nothing and every ordered comparison with it is false. The opsets
// differ only in the types they admit (more of them over time; bfloat16 at 13 and 16), not in the
// semantics.
//
// And, Or, Xor (opset 7) take two bool inputs.

#include "backends/cpu/reference/ew_broadcast.hpp"
#include "backends/cpu/reference/ew_operands.hpp"

#include <cstdint>
#include <functional>

namespace redwood::cpu {
namespace {

/// A binary op on two inputs of one type Ts... whose result is bool.
template <typename Op, typename... Ts>
class PredicateKernel final : public Kernel {
 public:
  PredicateKernel(const Node& node, const KernelInfo& info) {
    expect_input_count(node, 2);
    expect_same_typed_inputs(node, info, 0, {dtype_of<Ts>...});
  }

  void run(KernelContext& ctx) override {
    const std::vector<Tensor> in = contiguous_inputs(ctx, 0, 2);
    Tensor out = allocate_broadcast_output(ctx, DType::kBool, in);
    dispatch<Ts...>(in[0].dtype(), ctx.node, [&](auto tag) {
      using T = decltype(tag);
      detail::broadcast_binary<T, T, bool>(in[0], in[1], out, Op{});
    });
    ctx.outputs[0] = std::move(out);
  }
};

template <typename Op>
using OrderKernel = PredicateKernel<Op, float, std::int64_t, std::int32_t, std::uint8_t>;
using EqualKernel =
    PredicateKernel<std::equal_to<>, float, std::int64_t, std::int32_t, std::uint8_t, bool>;
template <typename Op>
using LogicalKernel = PredicateKernel<Op, bool>;

}  // namespace

RW_REGISTER_KERNEL("Equal", Device::kCpu, make_factory<EqualKernel>());
RW_REGISTER_KERNEL("Less", Device::kCpu, make_factory<OrderKernel<std::less<>>>());
RW_REGISTER_KERNEL("LessOrEqual", Device::kCpu, make_factory<OrderKernel<std::less_equal<>>>());
RW_REGISTER_KERNEL("Greater", Device::kCpu, make_factory<OrderKernel<std::greater<>>>());
RW_REGISTER_KERNEL("GreaterOrEqual", Device::kCpu,
                   make_factory<OrderKernel<std::greater_equal<>>>());
RW_REGISTER_KERNEL("And", Device::kCpu, make_factory<LogicalKernel<std::logical_and<>>>());
RW_REGISTER_KERNEL("Or", Device::kCpu, make_factory<LogicalKernel<std::logical_or<>>>());
// Xor of two bools is their inequality.
RW_REGISTER_KERNEL("Xor", Device::kCpu, make_factory<LogicalKernel<std::not_equal_to<>>>());

}  // namespace redwood::cpu
