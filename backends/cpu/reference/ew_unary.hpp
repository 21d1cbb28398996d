#pragma once
// The unary elementwise reference kernels' loop and kernel template.
//
// apply_unary computes out[i] = op(in[i]) over a tensor in parallel chunks, each chunk in
// vectorizable blocks (ew_loop.hpp); the output has the input's shape and the op's result type
// (the input's, or bool for IsNaN and IsInf). UnaryKernel<Op, Ts...> is the whole kernel of an
// op without extra inputs: Op is built from the node at load (reading and checking its
// attributes) and takes the element types Ts.

#include "backends/cpu/reference/ew_loop.hpp"
#include "backends/cpu/reference/kernel_util.hpp"

#include <cstdint>
#include <type_traits>

namespace redwood::cpu {

namespace detail {

inline constexpr std::int64_t kUnaryGrain = std::int64_t{1} << 15;

// The output is freshly allocated, never the input: __restrict lets the loop vectorize (noinline
// keeps that guarantee attached to the parameters; see ew_broadcast.hpp).
template <typename T, typename O, typename Op>
[[gnu::noinline]] void unary_run(const T* __restrict in, O* __restrict out, std::int64_t n,
                                 const Op& op) {
  blocked_loop(n, [&](std::int64_t i) { out[i] = op(in[i]); });
}

}  // namespace detail

/// A new tensor of input's shape and type O (default: the input's type T) holding op(x) for each
/// element x of `input` (any strides), allocated as output 0 of the running node.
template <typename T, typename O = T, typename Op>
Tensor apply_unary(const KernelContext& ctx, const Tensor& input, const Op& op) {
  const Tensor x = input.contiguous();
  Tensor y = ctx.allocate_output(0, dtype_of<O>, x.shape());
  const T* in = x.data<T>();
  O* out = y.data<O>();
  parallel_for(x.numel(), detail::kUnaryGrain, [&](std::int64_t begin, std::int64_t end) {
    detail::unary_run(in + begin, out + begin, end - begin, op);
  });
  return y;
}

/// The kernel of a one-input, one-output elementwise op: Op is constructed from the node (or
/// default-constructed when it has no attributes) and called as op(T) -> O for each T in Ts.
/// Input types outside Ts are Unsupported, at load when known, else at run.
template <typename Op, typename... Ts>
class UnaryKernel final : public Kernel {
 public:
  UnaryKernel(const Node& node, const KernelInfo& info) : op_(make_op(node)) {
    if (!info.input_dtypes.empty()) expect_dtype(node, info.input_dtypes[0], {dtype_of<Ts>...});
  }
  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    dispatch<Ts...>(x.dtype(), ctx.node, [&](auto tag) {
      using T = decltype(tag);
      ctx.outputs[0] = apply_unary<T, decltype(op_(T{}))>(ctx, x, op_);
    });
  }

 private:
  static Op make_op(const Node& node) {
    if constexpr (std::is_constructible_v<Op, const Node&>)
      return Op(node);
    else
      return Op{};
  }
  Op op_;
};

/// The kernel of a float32-only elementwise op.
template <typename Op>
using FloatUnaryKernel = UnaryKernel<Op, float>;

}  // namespace redwood::cpu
