#pragma once
// What ScatterElements and ScatterND share: the kernel itself (ScatterKernel, with the op's own
// addressing as a parameter), the `reduction` attribute (opset 16: none, add, mul; opset 18: max,
// min too) and writing the updates into the output in order.
//
// Updates are applied one after another, so with `none` the last update of an element wins and
// with a reduction every update counts (duplicate indices add up). Reductions compute in the
// element type (wrapping for integers, as numpy's fixed-width integers do); float16 and bfloat16
// compute in float and round back. `none` copies bytes, so it takes any dtype.

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/op_inputs.hpp"
#include "backends/cpu/reference/shape_copy.hpp"

#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace redwood::cpu::detail {

enum class ScatterReduction { kNone, kAdd, kMul, kMax, kMin };

/// Calls fn(T{}) for the element type T of `dtype` if a reduction computes in it; throws
/// Unsupported naming the node otherwise (bool).
template <typename Fn>
void dispatch_reducible(DType dtype, const Node& node, Fn&& fn) {
  dispatch<float, Half, BFloat16, std::int64_t, std::int32_t, std::uint8_t>(dtype, node,
                                                                            std::forward<Fn>(fn));
}

/// The node's `reduction`; throws InvalidArgument for an unknown one or one its opset lacks, and
/// Unsupported for a reduction over a type it does not compute in (data is input 0).
inline ScatterReduction read_scatter_reduction(const Node& node, const KernelInfo& info) {
  const std::string r = node.attr_string("reduction", "none");
  ScatterReduction out;
  std::int64_t since = 16;
  if (r == "none") {
    return ScatterReduction::kNone;
  } else if (r == "add") {
    out = ScatterReduction::kAdd;
  } else if (r == "mul") {
    out = ScatterReduction::kMul;
  } else if (r == "max" || r == "min") {
    out = r == "max" ? ScatterReduction::kMax : ScatterReduction::kMin;
    since = 18;
  } else {
    throw InvalidArgument(fmt::format("{}: reduction '{}' is none of none, add, mul, max, min",
                                      node.where(), r));
  }
  RW_EXPECTS(info.opset >= since, InvalidArgument,
             "{}: reduction '{}' needs opset {}, the model has {}", node.where(), r, since,
             info.opset);
  if (input_dtype(info, 0) != DType::kUndefined) dispatch_reducible(input_dtype(info, 0), node, [](auto) {});
  return out;
}

template <typename T>
T reduce_scatter_element(ScatterReduction r, T a, T b) {
  if constexpr (std::is_same_v<T, Half>) {
    return float_to_half(reduce_scatter_element(r, half_to_float(a), half_to_float(b)));
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return float_to_bf16(reduce_scatter_element(r, bf16_to_float(a), bf16_to_float(b)));
  } else {
    // Integers wrap: the arithmetic is done in the unsigned type of the same width.
    using W = typename std::conditional_t<std::is_floating_point_v<T>, std::type_identity<T>,
                                          std::make_unsigned<T>>::type;
    switch (r) {
      case ScatterReduction::kAdd: return static_cast<T>(static_cast<W>(a) + static_cast<W>(b));
      case ScatterReduction::kMul: return static_cast<T>(static_cast<W>(a) * static_cast<W>(b));
      case ScatterReduction::kMax: return std::max(a, b);
      case ScatterReduction::kMin: return std::min(a, b);
      case ScatterReduction::kNone: break;
    }
    return b;
  }
}

/// Applies updates[i·slice .. (i+1)·slice) to out[offsets[i] .. offsets[i] + slice) for each i in
/// order (offsets and slice in elements of `dtype`).
inline void scatter_slices(const Node& node, ScatterReduction reduction, DType dtype, std::byte* out,
                           std::span<const std::int64_t> offsets, const std::byte* updates,
                           std::int64_t slice) {
  const auto elem = static_cast<std::int64_t>(dtype_size(dtype));
  if (reduction == ScatterReduction::kNone) {
    for (std::size_t i = 0; i < offsets.size(); ++i) {
      std::memcpy(out + offsets[i] * elem, updates + static_cast<std::int64_t>(i) * slice * elem,
                  static_cast<std::size_t>(slice * elem));
    }
    return;
  }
  dispatch_reducible(dtype, node, [&](auto zero) {
    using T = decltype(zero);
    T* dst = reinterpret_cast<T*>(out);
    const T* src = reinterpret_cast<const T*>(updates);
    for (std::size_t i = 0; i < offsets.size(); ++i) {
      for (std::int64_t j = 0; j < slice; ++j) {
        T& d = dst[offsets[i] + j];
        d = reduce_scatter_element(reduction, d, src[static_cast<std::int64_t>(i) * slice + j]);
      }
    }
  });
}

/// A scatter's output: a copy of `data` (from ctx.allocate_output(0)) with the slices of `updates`
/// (contiguous, data's dtype) applied at `offsets` by scatter_slices.
inline Tensor scatter_into_copy(const KernelContext& ctx, ScatterReduction reduction, const Tensor& data,
                                std::span<const std::int64_t> offsets, const Tensor& updates,
                                std::int64_t slice) {
  Tensor y = ctx.allocate_output(0, data.dtype(), data.shape());
  copy_strided(bytes_of(data), data.shape(), data.strides(), dtype_size(data.dtype()), bytes_of(y));
  scatter_slices(ctx.node, reduction, data.dtype(), bytes_of(y), offsets, bytes_of(updates), slice);
  return y;
}

/// Where a scatter's updates go: the output element where each slice of the updates starts, and
/// the slices' element count.
struct ScatterTargets {
  std::vector<std::int64_t> offsets;
  std::int64_t slice = 1;
};

/// A scatter op: inputs data, indices (int64 or int32) and updates (data's type); the output is
/// scatter_into_copy's. `Targets` is the op's addressing: constructed from the node (its
/// attributes), then called as targets(node, data, indices, updates_shape) -> ScatterTargets,
/// checking the shapes and the indices.
template <typename Targets>
class ScatterKernel final : public Kernel {
 public:
  ScatterKernel(const Node& node, const KernelInfo& info)
      : targets_(node), reduction_(read_scatter_reduction(node, info)) {
    expect_dtype(node, input_dtype(info, 1), {DType::kI64, DType::kI32}, "indices");
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor& data = ctx.input(0);
    const Tensor updates = ctx.input(2).contiguous();
    RW_EXPECTS(updates.dtype() == data.dtype(), InvalidArgument,
               "{}: updates {} and data {} differ in type", node.where(), updates.description(),
               data.description());
    const ScatterTargets t = targets_(node, data, ctx.input(1), updates.shape());
    ctx.outputs[0] = scatter_into_copy(ctx, reduction_, data, t.offsets, updates, t.slice);
  }

 private:
  Targets targets_;
  ScatterReduction reduction_;
};

}  // namespace redwood::cpu::detail
