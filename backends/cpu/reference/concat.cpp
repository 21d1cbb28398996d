// Concat: joins inputs of one dtype along `axis` (negative counts from the back). The other
// dimensions must agree. Any dtype: blocks of bytes are copied.

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/shape_copy.hpp"

namespace redwood::cpu {
namespace {

class ConcatKernel final : public Kernel {
 public:
  ConcatKernel(const Node& node, const KernelInfo& info) {
    // Opset 1 made axis optional (default 1); from opset 4 it is required.
    RW_EXPECTS(node.has_attr("axis") || info.opset < 4, InvalidArgument,
               "{}: attribute 'axis' is required", node.where());
    axis_ = node.attr_int("axis", 1);
    DType first = DType::kUndefined;
    for (DType t : info.input_dtypes) {
      if (t == DType::kUndefined) continue;
      if (first == DType::kUndefined) first = t;
      RW_EXPECTS(t == first, InvalidArgument, "{}: inputs have different types ({} and {})",
                 node.where(), dtype_name(first), dtype_name(t));
    }
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    std::vector<Tensor> inputs;
    for (std::size_t i = 0; i < ctx.inputs.size(); ++i) inputs.push_back(ctx.input(i).contiguous());
    RW_EXPECTS(!inputs.empty(), InvalidArgument, "{}: Concat needs at least one input",
               node.where());
    const Tensor& first = inputs[0];
    const std::int64_t rank = first.rank();
    RW_EXPECTS(rank > 0, InvalidArgument, "{}: cannot concatenate scalars", node.where());
    const std::int64_t axis = normalize_axis(axis_, rank);

    Shape out_shape = first.shape();
    out_shape[axis] = 0;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& t = inputs[i];
      bool ok = t.dtype() == first.dtype() && t.rank() == rank;
      for (std::int64_t d = 0; ok && d < rank; ++d)
        ok = d == axis || t.shape()[d] == first.shape()[d];
      RW_EXPECTS(ok, InvalidArgument, "{}: input {} is {} but input 0 is {} (axis {})",
                 node.where(), i, t.description(), first.description(), axis);
      out_shape[axis] += t.shape()[axis];
    }

    Tensor out = ctx.allocate_output(0, first.dtype(), out_shape);
    // outer x (axis extent x inner): each input contributes one block per outer index.
    const std::size_t elem = dtype_size(first.dtype());
    std::int64_t outer = 1, inner = 1;
    for (std::int64_t d = 0; d < axis; ++d) outer *= out_shape[d];
    for (std::int64_t d = axis + 1; d < rank; ++d) inner *= out_shape[d];
    const std::int64_t out_block = out_shape[axis] * inner * static_cast<std::int64_t>(elem);
    std::byte* dst = detail::bytes_of(out);
    std::int64_t offset = 0;  // bytes into each output block
    for (const Tensor& t : inputs) {
      const std::int64_t block = t.shape()[axis] * inner * static_cast<std::int64_t>(elem);
      const std::byte* src = detail::bytes_of(t);
      for (std::int64_t o = 0; o < outer; ++o) {
        std::memcpy(dst + o * out_block + offset, src + o * block, static_cast<std::size_t>(block));
      }
      offset += block;
    }
    ctx.outputs[0] = std::move(out);
  }

 private:
  std::int64_t axis_;
};

}  // namespace

RW_REGISTER_KERNEL("Concat", Device::kCpu, make_factory<ConcatKernel>());

}  // namespace redwood::cpu
