#pragma once
// What Cast (cast.cpp) shares with the kernels that also make a tensor of a given type: the element
// conversion (CastLike, whose target type is its second input's) and reading a type attribute
// (EyeLike's dtype).

#include "core/op_registry.hpp"

namespace redwood::cpu {

/// x converted to `to` as ONNX Cast defines it (see cast.cpp): x itself when it already has that
/// type, else a new tensor (from ctx.allocate_output(0) where the conversion writes one itself).
Tensor cast_to(const KernelContext& ctx, const Tensor& x, DType to);

/// The type that the ONNX type code in attribute `key` (present) names; throws Unsupported naming
/// the node and the type when Redwood does not hold it (double, string, int8, ...).
DType dtype_attribute(const Node& node, const std::string& key);

}  // namespace redwood::cpu
