#pragma once
// Operand checks and the output of the broadcasting elementwise kernels whose data inputs share
// one type: comparisons, logical ops, Mod, BitShift, Where (X and Y) and the variadic
// Min/Max/Sum/Mean. Types are checked twice, as everywhere: at load from what the graph knows,
// and at run from the tensors themselves.

#include "backends/cpu/reference/kernel_util.hpp"

#include <fmt/ranges.h>

#include <cstddef>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

namespace redwood::cpu {

/// At load: throws InvalidArgument unless the node has `count` inputs.
inline void expect_input_count(const Node& node, std::size_t count) {
  RW_EXPECTS(node.inputs.size() == count, InvalidArgument, "{}: takes {} inputs, has {}",
             node.where(), count, node.inputs.size());
}

/// At load: throws Unsupported unless each input from `first` on is one of `allowed` (unknown
/// types pass), and InvalidArgument when two of them whose types are known differ.
inline void expect_same_typed_inputs(const Node& node, const KernelInfo& info, std::size_t first,
                                     std::initializer_list<DType> allowed) {
  DType seen = DType::kUndefined;
  for (std::size_t i = first; i < info.input_dtypes.size(); ++i) {
    const DType t = info.input_dtypes[i];
    expect_dtype(node, t, allowed, fmt::format("input {}", i).c_str());
    if (t == DType::kUndefined) continue;
    RW_EXPECTS(seen == DType::kUndefined || seen == t, InvalidArgument,
               "{}: inputs {} to {} must have one type, found {} and {}", node.where(), first,
               info.input_dtypes.size() - 1, dtype_name(seen), dtype_name(t));
    seen = t;
  }
}

/// At run: the node's inputs, contiguous, at least `min_count` of them; those from `first` on
/// must have one type (InvalidArgument naming the node and the tensors otherwise).
inline std::vector<Tensor> contiguous_inputs(const KernelContext& ctx, std::size_t first,
                                             std::size_t min_count) {
  const Node& node = ctx.node;
  RW_EXPECTS(ctx.inputs.size() >= min_count, InvalidArgument,
             "{}: needs at least {} inputs, has {}", node.where(), min_count, ctx.inputs.size());
  std::vector<Tensor> in;
  in.reserve(ctx.inputs.size());
  for (std::size_t i = 0; i < ctx.inputs.size(); ++i) {
    in.push_back(ctx.input(i).contiguous());
    RW_EXPECTS(i <= first || in[i].dtype() == in[first].dtype(), InvalidArgument,
               "{}: inputs {} to {} must have one type, found {} (input {}) and {} (input {})",
               node.where(), first, ctx.inputs.size() - 1, in[first].description(), first,
               in[i].description(), i);
  }
  return in;
}

/// Allocates output 0 of `dtype` with the multidirectional (numpy) broadcast of the operands'
/// shapes; InvalidArgument naming the node and every shape when they do not broadcast.
inline Tensor allocate_broadcast_output(const KernelContext& ctx, DType dtype,
                                        std::span<const Tensor> operands) {
  Shape shape;
  try {
    for (const Tensor& t : operands) shape = broadcast_shapes(shape, t.shape());
  } catch (const InvalidArgument&) {
    std::vector<std::string> shapes;
    for (const Tensor& t : operands) shapes.push_back(shape_str(t.shape()));
    throw InvalidArgument(fmt::format("{}: input shapes {} do not broadcast", ctx.node.where(),
                                      fmt::join(shapes, ", ")));
  }
  return ctx.allocate_output(0, dtype, std::move(shape));
}

}  // namespace redwood::cpu
