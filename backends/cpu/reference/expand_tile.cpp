// Expand and Tile: repeat an input's elements into a larger tensor. Any dtype: both are one strided
// byte copy (copy_strided) of the input read with stride 0 where it repeats.
//
// Expand (opset 8, 13): broadcasts the input to `shape` (a 1-D int64 input) by numpy's
// multidirectional rule, so the output's shape is broadcast(input.shape, shape): a 1 in `shape`
// keeps the input's extent, and `shape` may have fewer dimensions than the input.
//
// Tile (opset 6, 13): repeats the input repeats[d] times along each dimension d (`repeats`: a 1-D
// int64 input, one non-negative entry per dimension). Output index o along d reads input index
// o mod extent[d], so the output, seen as [r0, x0, r1, x1, ...], is the input read with stride 0
// along each r. (Opset 1's form, with `tiles` and `axis` inputs, is rejected at load.)

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/op_inputs.hpp"
#include "backends/cpu/reference/shape_copy.hpp"

#include <fmt/ranges.h>

namespace redwood::cpu {
namespace {

// The values of a 1-D int64 input (Expand's shape, Tile's repeats), each checked non-negative.
std::vector<std::int64_t> read_extents(const Node& node, const Tensor& t, const char* what) {
  RW_EXPECTS(t.dtype() == DType::kI64 && t.rank() == 1, InvalidArgument,
             "{}: {} must be a 1-D int64 tensor, got {}", node.where(), what, t.description());
  std::vector<std::int64_t> v = t.to_int64_vector();
  for (std::int64_t e : v) {
    RW_EXPECTS(e >= 0, InvalidArgument, "{}: {} [{}] has a negative entry", node.where(), what,
               fmt::join(v, ", "));
  }
  return v;
}

// Checks at load that the node has its second input, `what`, and that it is int64 where known.
void expect_extents_input(const Node& node, const KernelInfo& info, const char* what) {
  RW_EXPECTS(node.has_input(1), InvalidArgument, "{}: {} takes an input and {}", node.where(),
             node.op_type, what);
  expect_dtype(node, detail::input_dtype(info, 1), {DType::kI64}, what);
}

class ExpandKernel final : public Kernel {
 public:
  ExpandKernel(const Node& node, const KernelInfo& info) {
    expect_extents_input(node, info, "shape");
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor& x = ctx.input(0);
    const Shape target = read_extents(node, ctx.input(1), "shape");
    Shape out_shape;
    try {
      out_shape = broadcast_shapes(x.shape(), target);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(fmt::format("{}: cannot expand {}: {}", node.where(), x.description(), e.what()));
    }
    // The input's strides aligned to the output's trailing dimensions; 0 where it repeats.
    const std::size_t lead = out_shape.size() - x.shape().size();
    Strides strides(out_shape.size(), 0);
    for (std::size_t d = 0; d < x.shape().size(); ++d) {
      if (x.shape()[d] != 1) strides[lead + d] = x.strides()[d];
    }
    Tensor y = ctx.allocate_output(0, x.dtype(), out_shape);
    detail::copy_strided(detail::bytes_of(x), out_shape, strides, dtype_size(x.dtype()),
                         detail::bytes_of(y));
    ctx.outputs[0] = std::move(y);
  }
};

class TileKernel final : public Kernel {
 public:
  TileKernel(const Node& node, const KernelInfo& info) {
    RW_EXPECTS(info.opset >= 6, Unsupported,
               "{}: Tile before opset 6 (tiles and axis inputs) is not supported", node.where());
    expect_extents_input(node, info, "repeats");
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor& x = ctx.input(0);
    const std::vector<std::int64_t> repeats = read_extents(node, ctx.input(1), "repeats");
    RW_EXPECTS(static_cast<std::int64_t>(repeats.size()) == x.rank(), InvalidArgument,
               "{}: repeats [{}] must have one entry per dimension of {}", node.where(),
               fmt::join(repeats, ", "), x.description());
    Shape out_shape(repeats.size()), read_shape, read_strides;
    for (std::size_t d = 0; d < repeats.size(); ++d) {
      RW_EXPECTS(!__builtin_mul_overflow(repeats[d], x.shape()[d], &out_shape[d]), InvalidArgument,
                 "{}: repeating {} by [{}] overflows", node.where(), x.description(), fmt::join(repeats, ", "));
      read_shape.insert(read_shape.end(), {repeats[d], x.shape()[d]});
      read_strides.insert(read_strides.end(), {0, x.strides()[d]});
    }
    Tensor y = ctx.allocate_output(0, x.dtype(), out_shape);
    detail::copy_strided(detail::bytes_of(x), read_shape, read_strides, dtype_size(x.dtype()),
                         detail::bytes_of(y));
    ctx.outputs[0] = std::move(y);
  }
};

}  // namespace

RW_REGISTER_KERNEL("Expand", Device::kCpu, make_factory<ExpandKernel>());
RW_REGISTER_KERNEL("Tile", Device::kCpu, make_factory<TileKernel>());

}  // namespace redwood::cpu
