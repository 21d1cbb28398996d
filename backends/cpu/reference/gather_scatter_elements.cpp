// GatherElements, ScatterElements and Scatter: element-wise indexing along one axis.
//
// Both take `indices` (int64 or int32) of the data's rank, no larger than the data along the other
// axes; an index addresses the data element at the index's own position with the coordinate along
// `axis` (default 0, negative counts from the back) replaced by its value. A negative index counts
// from the back (opset 13); one outside [-extent, extent) is an error.
//
// GatherElements (opset 11, 13): the output has the indices' shape, out[p] = data[p with p_axis =
// indices[p]]. Any dtype: elements are copied as bytes.
// ScatterElements (opset 11, 13, 16, 18): the output is a copy of the data with updates (the
// indices' shape) written to those elements in row-major order; `reduction` (opset 16: add, mul;
// 18: max, min) combines each with what is there instead (scatter.hpp).
// Scatter (opset 9, deprecated by opset 11) is ScatterElements without reduction.

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/op_inputs.hpp"
#include "backends/cpu/reference/scatter.hpp"
#include "backends/cpu/reference/shape_copy.hpp"

namespace redwood::cpu {
namespace {

// The data element (offset in a contiguous tensor of data_shape) that each element of `indices`
// addresses, in the indices' row-major order; checks ranks, extents and index ranges.
std::vector<std::int64_t> element_offsets(const Node& node, const Shape& data_shape,
                                          const Tensor& indices, std::int64_t axis) {
  const auto rank = static_cast<std::int64_t>(data_shape.size());
  RW_EXPECTS(indices.dtype() == DType::kI64 || indices.dtype() == DType::kI32, InvalidArgument,
             "{}: indices must be int64 or int32, got {}", node.where(), indices.description());
  RW_EXPECTS(indices.rank() == rank, InvalidArgument, "{}: indices {} and data {} differ in rank",
             node.where(), indices.description(), shape_str(data_shape));
  for (std::int64_t d = 0; d < rank; ++d) {
    RW_EXPECTS(d == axis || indices.shape()[d] <= data_shape[d], InvalidArgument,
               "{}: indices {} are larger than data {} along axis {}", node.where(),
               indices.description(), shape_str(data_shape), d);
  }
  const Strides strides = contiguous_strides(data_shape);
  const std::int64_t extent = data_shape[axis];
  std::vector<std::int64_t> offsets = indices.to_int64_vector();
  Shape pos(data_shape.size(), 0);  // the current element's position in indices
  for (std::int64_t& v : offsets) {
    RW_EXPECTS(v >= -extent && v < extent, InvalidArgument,
               "{}: index {} is out of range for axis {} of data {}", node.where(), v, axis,
               shape_str(data_shape));
    std::int64_t off = (v < 0 ? v + extent : v) * strides[axis];
    for (std::int64_t d = 0; d < rank; ++d) {
      if (d != axis) off += pos[d] * strides[d];
    }
    v = off;
    for (std::int64_t d = rank; d-- > 0;) {
      if (++pos[d] < indices.shape()[d]) break;
      pos[d] = 0;
    }
  }
  return offsets;
}

template <std::size_t N>
void gather_bytes(const std::byte* src, const std::int64_t* offsets, std::byte* dst,
                  std::int64_t begin, std::int64_t end) {
  for (std::int64_t i = begin; i < end; ++i) {
    std::memcpy(dst + i * std::int64_t(N), src + offsets[i] * std::int64_t(N), N);
  }
}

class GatherElementsKernel final : public Kernel {
 public:
  GatherElementsKernel(const Node& node, const KernelInfo& info) : axis_(node.attr_int("axis", 0)) {
    expect_dtype(node, detail::input_dtype(info, 1), {DType::kI64, DType::kI32}, "indices");
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor data = ctx.input(0).contiguous();
    const Tensor& indices = ctx.input(1);
    RW_EXPECTS(data.rank() > 0, InvalidArgument, "{}: cannot gather from a scalar", node.where());
    const std::int64_t axis = detail::node_axis(node, axis_, data.rank());
    const std::vector<std::int64_t> offsets = element_offsets(node, data.shape(), indices, axis);
    Tensor y = ctx.allocate_output(0, data.dtype(), indices.shape());
    const std::byte* src = detail::bytes_of(data);
    std::byte* dst = detail::bytes_of(y);
    const std::size_t elem = dtype_size(data.dtype());
    parallel_for(y.numel(), std::int64_t{1} << 15, [&](std::int64_t begin, std::int64_t end) {
      switch (elem) {
        case 1: gather_bytes<1>(src, offsets.data(), dst, begin, end); break;
        case 2: gather_bytes<2>(src, offsets.data(), dst, begin, end); break;
        case 4: gather_bytes<4>(src, offsets.data(), dst, begin, end); break;
        default: gather_bytes<8>(src, offsets.data(), dst, begin, end); break;
      }
    });
    ctx.outputs[0] = std::move(y);
  }

 private:
  std::int64_t axis_;
};

// ScatterElements' addressing: updates of the indices' shape, one element each.
struct ElementTargets {
  explicit ElementTargets(const Node& node) : axis(node.attr_int("axis", 0)) {}

  detail::ScatterTargets operator()(const Node& node, const Tensor& data, const Tensor& indices,
                                    const Shape& updates) const {
    RW_EXPECTS(data.rank() > 0, InvalidArgument, "{}: cannot scatter into a scalar", node.where());
    RW_EXPECTS(updates == indices.shape(), InvalidArgument,
               "{}: updates {} must have the shape of indices {}", node.where(), shape_str(updates),
               indices.description());
    return {element_offsets(node, data.shape(), indices, detail::node_axis(node, axis, data.rank())), 1};
  }

  std::int64_t axis;
};

}  // namespace

RW_REGISTER_KERNEL("GatherElements", Device::kCpu, make_factory<GatherElementsKernel>());
RW_REGISTER_KERNEL("ScatterElements", Device::kCpu, make_factory<detail::ScatterKernel<ElementTargets>>());
RW_REGISTER_KERNEL("Scatter", Device::kCpu, make_factory<detail::ScatterKernel<ElementTargets>>());

}  // namespace redwood::cpu
