// CumSum (ONNX opsets 11-14): running sums of x along one axis, given as a 0-D or 1-element
// int32/int64 input (negative counts from the back).
//   exclusive = 1: each output leaves out its own element (the first is 0).
//   reverse = 1:   the sums run from the end of the axis backwards.
// Types: float (sums kept in double), int64 and int32 (sums kept in int64). Opset 14 adds
// float16 and bfloat16, which Redwood's CPU kernels do not take.

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/reduce_plan.hpp"

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace redwood::cpu {
namespace {

void expect_x_dtype(const Node& node, DType dtype) {
  expect_dtype(node, dtype, {DType::kF32, DType::kI64, DType::kI32}, "x");
}

class CumSumKernel final : public Kernel {
 public:
  CumSumKernel(const Node& node, const KernelInfo& info)
      : exclusive_(node.attr_int("exclusive", 0) != 0), reverse_(node.attr_int("reverse", 0) != 0) {
    expect_x_dtype(node, info.input_dtypes.empty() ? DType::kUndefined : info.input_dtypes[0]);
    RW_EXPECTS(node.has_input(1), InvalidArgument, "{}: needs the input axis", node.where());
    if (info.input_dtypes.size() > 1) {
      expect_dtype(node, info.input_dtypes[1], {DType::kI64, DType::kI32}, "axis");
    }
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor x = ctx.input(0).contiguous();
    expect_x_dtype(node, x.dtype());
    const Tensor& axis_t = ctx.input(1);
    RW_EXPECTS((axis_t.dtype() == DType::kI64 || axis_t.dtype() == DType::kI32) && axis_t.rank() <= 1 &&
                   axis_t.numel() == 1,
               InvalidArgument, "{}: axis {} must be one int32 or int64 value", node.where(),
               axis_t.description());
    const std::int64_t axis = node_axis(node, std::int64_t(axis_t.get_as_double(0)), x.shape());
    const AxisSplit s = split_at_axis(x.shape(), axis);
    Tensor y = ctx.allocate_output(0, x.dtype(), x.shape());
    ctx.outputs[0] = y;
    if (y.numel() == 0) return;
    dispatch<float, std::int64_t, std::int32_t>(x.dtype(), node, [&](auto tag) {
      using T = decltype(tag);
      using Wide = std::conditional_t<std::is_floating_point_v<T>, double, std::int64_t>;
      const T* xp = x.data<T>();
      T* yp = y.data<T>();
      parallel_for(s.outer, std::max<std::int64_t>(1, 16384 / (s.length * s.inner)),
                   [&](std::int64_t begin, std::int64_t end) {
                     std::vector<Wide> sum(static_cast<std::size_t>(s.inner));
                     for (std::int64_t o = begin; o < end; ++o) {
                       std::fill(sum.begin(), sum.end(), Wide{0});
                       for (std::int64_t step = 0; step < s.length; ++step) {
                         const std::int64_t l = reverse_ ? s.length - 1 - step : step;
                         const T* src = xp + (o * s.length + l) * s.inner;
                         T* dst = yp + (o * s.length + l) * s.inner;
                         for (std::int64_t i = 0; i < s.inner; ++i) {
                           const Wide before = sum[i];
                           sum[i] += static_cast<Wide>(src[i]);
                           dst[i] = static_cast<T>(exclusive_ ? before : sum[i]);
                         }
                       }
                     }
                   });
    });
  }

 private:
  bool exclusive_;
  bool reverse_;
};

}  // namespace

RW_REGISTER_KERNEL("CumSum", Device::kCpu, make_factory<CumSumKernel>());

}  // namespace redwood::cpu
