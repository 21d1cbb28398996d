#pragma once
// Reading a node's small inputs and attributes: the dtype a factory knows of an input, an axis,
// and the one value of a scalar input (Trilu's k, OneHot's depth, Range's bounds), each checked
// with the node named.

#include "backends/cpu/reference/kernel_util.hpp"

#include <cstdint>

namespace redwood::cpu::detail {

/// The dtype the factory knows of input `i`: kUndefined when the node lacks it or when it is known
/// only at run time.
inline DType input_dtype(const KernelInfo& info, std::size_t i) {
  return i < info.input_dtypes.size() ? info.input_dtypes[i] : DType::kUndefined;
}

/// `axis` in [0, rank) (a negative one counts from the back); throws InvalidArgument naming the
/// node when it is outside [-rank, rank).
inline std::int64_t node_axis(const Node& node, std::int64_t axis, std::int64_t rank) {
  RW_EXPECTS(axis >= -rank && axis < rank, InvalidArgument, "{}: axis {} is out of range for rank {}",
             node.where(), axis, rank);
  return axis < 0 ? axis + rank : axis;
}

/// Throws InvalidArgument naming the node and `what` unless `t` holds one value (a scalar or a
/// tensor of one element).
inline void expect_one_value(const Node& node, const Tensor& t, const char* what) {
  RW_EXPECTS(t.numel() == 1, InvalidArgument, "{}: {} must hold one value, got {}", node.where(),
             what, t.description());
}

/// The value of a one-element input, as double.
inline double scalar_input(const Node& node, const Tensor& t, const char* what) {
  expect_one_value(node, t, what);
  return t.get_as_double(0);
}

/// The value of a one-element integer input as int64 (exact, unlike a double past 2^53).
inline std::int64_t scalar_int_input(const Node& node, const Tensor& t, const char* what) {
  expect_one_value(node, t, what);
  return t.to_int64_vector()[0];
}

}  // namespace redwood::cpu::detail
