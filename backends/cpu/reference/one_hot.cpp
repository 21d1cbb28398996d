// OneHot (opset 9, 11): indices → a tensor one rank higher with `depth` entries along `axis`,
// each `on` where the entry's position equals the index and `off` elsewhere.
//
// Inputs: indices (any numeric type; floats are truncated to integers), depth (a one-element
// numeric tensor), values ([off, on], any type: the output's). An index in [-depth, -1] counts from
// the back (opset 11; opset 9 documents only non-negative ones, and these read the same); an index
// outside [-depth, depth) gives an all-`off` entry, as the spec says, not an error. `axis`
// (default -1: innermost) is in [-r-1, r] for indices of rank r. Values are written as bytes.

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/op_inputs.hpp"
#include "backends/cpu/reference/shape_copy.hpp"

#include <cmath>
#include <cstring>

namespace redwood::cpu {
namespace {

constexpr std::initializer_list<DType> kNumeric = {DType::kF32, DType::kF16, DType::kBF16,
                                                   DType::kI64, DType::kI32, DType::kU8};

class OneHotKernel final : public Kernel {
 public:
  OneHotKernel(const Node& node, const KernelInfo& info) : axis_(node.attr_int("axis", -1)) {
    RW_EXPECTS(node.has_input(1) && node.has_input(2), InvalidArgument,
               "{}: OneHot takes indices, depth and values", node.where());
    expect_dtype(node, detail::input_dtype(info, 0), kNumeric, "indices");
    expect_dtype(node, detail::input_dtype(info, 1), kNumeric, "depth");
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor& indices = ctx.input(0);
    const Tensor values = ctx.input(2).contiguous();
    RW_EXPECTS(indices.dtype() != DType::kBool && ctx.input(1).dtype() != DType::kBool,
               InvalidArgument, "{}: indices and depth must be numeric", node.where());
    const double depth_value = detail::scalar_input(node, ctx.input(1), "depth");
    RW_EXPECTS(depth_value >= 0 && depth_value < static_cast<double>(kMaxElements),
               InvalidArgument, "{}: depth {} is not an extent", node.where(), depth_value);
    const auto depth = static_cast<std::int64_t>(depth_value);
    RW_EXPECTS(values.rank() == 1 && values.numel() == 2, InvalidArgument,
               "{}: values must be [off, on], got {}", node.where(), values.description());
    const std::int64_t axis = detail::node_axis(node, axis_, indices.rank() + 1);

    Shape out_shape = indices.shape();
    out_shape.insert(out_shape.begin() + axis, depth);
    Tensor y = ctx.allocate_output(0, values.dtype(), out_shape);
    std::int64_t outer = 1, inner = 1;
    for (std::int64_t d = 0; d < indices.rank(); ++d) (d < axis ? outer : inner) *= indices.shape()[d];

    const std::vector<std::int64_t> idx = indices.to_int64_vector();
    const auto elem = static_cast<std::int64_t>(dtype_size(values.dtype()));
    const std::byte* off = detail::bytes_of(values);
    const std::byte* on = off + elem;
    std::byte* out = detail::bytes_of(y);
    // Block o of the output is [depth, inner]: all `off`, then `on` at (index, i) for each i.
    parallel_for(outer, std::max<std::int64_t>(1, (std::int64_t{1} << 15) / std::max<std::int64_t>(1, depth * inner)),
                 [&](std::int64_t begin, std::int64_t end) {
                   for (std::int64_t o = begin; o < end; ++o) {
                     std::byte* block = out + o * depth * inner * elem;
                     detail::fill_bytes(block, off, static_cast<std::size_t>(elem), depth * inner);
                     for (std::int64_t i = 0; i < inner; ++i) {
                       std::int64_t v = idx[static_cast<std::size_t>(o * inner + i)];
                       if (v < 0) v += depth;
                       if (v < 0 || v >= depth) continue;
                       std::memcpy(block + (v * inner + i) * elem, on, static_cast<std::size_t>(elem));
                     }
                   }
                 });
    ctx.outputs[0] = std::move(y);
  }

 private:
  std::int64_t axis_;
};

}  // namespace

RW_REGISTER_KERNEL("OneHot", Device::kCpu, make_factory<OneHotKernel>());

}  // namespace redwood::cpu
