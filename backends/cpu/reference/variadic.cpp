// The variadic elementwise ops Min, Max, Sum and Mean: one or more inputs of one type, with
// multidirectional (numpy) broadcasting of all of them.
//
// Min, Max (opsets 8, 12, 13): float, float16, int64, int32, uint8 (integers since opset 12). A
// NaN in any input makes that element NaN, as numpy.minimum/maximum and ONNX's reference do.
// Sum, Mean (opsets 8, 13): float; Mean is the sum divided by the number of inputs.
// Opset 6 and earlier required equal shapes, which broadcasting also covers; opset 13 only adds
// bfloat16.
//
// N inputs fold pairwise, in input order, through the binary broadcast loop: N - 1 passes, each
// writing a tensor of the output's shape. One input is the output itself.

#include "backends/cpu/reference/ew_broadcast.hpp"
#include "backends/cpu/reference/ew_operands.hpp"

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace redwood::cpu {
namespace {

// float16 compares as float; the result is one of the operands, so nothing is rounded.
template <typename T>
auto comparable(T v) {
  if constexpr (std::is_same_v<T, Half>) {
    return half_to_float(v);
  } else {
    return v;
  }
}

struct MaxOp {
  template <typename T>
  T operator()(T a, T b) const {
    const auto x = comparable(a), y = comparable(b);
    if constexpr (std::is_floating_point_v<decltype(x)>) {
      return (x < y || std::isnan(y)) ? b : a;  // a NaN a stays
    } else {
      return x < y ? b : a;
    }
  }
};
struct MinOp {
  template <typename T>
  T operator()(T a, T b) const {
    const auto x = comparable(a), y = comparable(b);
    if constexpr (std::is_floating_point_v<decltype(x)>) {
      return (y < x || std::isnan(y)) ? b : a;
    } else {
      return y < x ? b : a;
    }
  }
};
struct SumOp {
  float operator()(float a, float b) const { return a + b; }
};

/// out = op(...op(op(in[0], in[1]), in[2])..., in[N-1]) over the broadcast of all inputs, for at
/// least two inputs. The passes alternate between `out` and a scratch tensor so that no pass
/// reads what it writes, arranged so that the last one writes `out`.
template <typename T, typename Op>
void fold_broadcast(const std::vector<Tensor>& in, Tensor& out, const Op& op) {
  const std::size_t passes = in.size() - 1;
  Tensor scratch = passes > 1 ? Tensor::empty(out.dtype(), out.shape()) : Tensor();
  Tensor acc = in[0];
  for (std::size_t p = 1; p <= passes; ++p) {
    Tensor& dst = (passes - p) % 2 == 0 ? out : scratch;
    detail::broadcast_binary<T, T, T>(acc, in[p], dst, op);
    acc = dst;
  }
}

template <typename Op, bool kMean, typename... Ts>
class VariadicKernel final : public Kernel {
 public:
  VariadicKernel(const Node& node, const KernelInfo& info) {
    RW_EXPECTS(!node.inputs.empty(), InvalidArgument, "{}: needs at least one input",
               node.where());
    expect_same_typed_inputs(node, info, 0, {dtype_of<Ts>...});
  }

  void run(KernelContext& ctx) override {
    const std::vector<Tensor> in = contiguous_inputs(ctx, 0, 1);
    dispatch<Ts...>(in[0].dtype(), ctx.node, [&](auto tag) {
      using T = decltype(tag);
      if (in.size() == 1) {
        ctx.outputs[0] = in[0];
        return;
      }
      Tensor out = allocate_broadcast_output(ctx, in[0].dtype(), in);
      fold_broadcast<T>(in, out, Op{});
      if constexpr (kMean) {
        const T count = static_cast<T>(in.size());
        T* data = out.data<T>();
        parallel_for(out.numel(), std::int64_t{1} << 15, [&](std::int64_t begin, std::int64_t end) {
          for (std::int64_t i = begin; i < end; ++i) data[i] /= count;
        });
      }
      ctx.outputs[0] = std::move(out);
    });
  }
};

template <typename Op>
using MinMaxKernel =
    VariadicKernel<Op, false, float, Half, std::int64_t, std::int32_t, std::uint8_t>;
using SumKernel = VariadicKernel<SumOp, false, float>;
using MeanKernel = VariadicKernel<SumOp, true, float>;

}  // namespace

RW_REGISTER_KERNEL("Min", Device::kCpu, make_factory<MinMaxKernel<MinOp>>());
RW_REGISTER_KERNEL("Max", Device::kCpu, make_factory<MinMaxKernel<MaxOp>>());
RW_REGISTER_KERNEL("Sum", Device::kCpu, make_factory<SumKernel>());
RW_REGISTER_KERNEL("Mean", Device::kCpu, make_factory<MeanKernel>());

}  // namespace redwood::cpu
