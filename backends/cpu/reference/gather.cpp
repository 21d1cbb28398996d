// Gather: picks slices of `data` along `axis` by `indices` (int64 or int32, negative counts from
// the back). Output shape: data.shape[:axis] + indices.shape + data.shape[axis+1:]. An index
// outside [-extent, extent) is an error. Any data dtype: slices are copied as bytes.

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/shape_copy.hpp"

namespace redwood::cpu {
namespace {

class GatherKernel final : public Kernel {
 public:
  GatherKernel(const Node& node, const KernelInfo& info) : axis_(node.attr_int("axis", 0)) {
    if (info.input_dtypes.size() > 1) {
      expect_dtype(node, info.input_dtypes[1], {DType::kI64, DType::kI32}, "indices");
    }
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor data = ctx.input(0).contiguous();
    const Tensor& indices = ctx.input(1);
    RW_EXPECTS(indices.dtype() == DType::kI64 || indices.dtype() == DType::kI32, InvalidArgument,
               "{}: indices must be int64 or int32, got {}", node.where(), indices.description());
    RW_EXPECTS(data.rank() > 0, InvalidArgument, "{}: cannot gather from a scalar", node.where());
    const std::int64_t axis = normalize_axis(axis_, data.rank());
    const std::int64_t extent = data.shape()[axis];

    std::vector<std::int64_t> idx = indices.to_int64_vector();
    for (std::int64_t& i : idx) {
      RW_EXPECTS(i >= -extent && i < extent, InvalidArgument,
                 "{}: index {} is out of range for axis {} of {}", node.where(), i, axis,
                 data.description());
      if (i < 0) i += extent;
    }

    Shape out_shape(data.shape().begin(), data.shape().begin() + axis);
    out_shape.insert(out_shape.end(), indices.shape().begin(), indices.shape().end());
    out_shape.insert(out_shape.end(), data.shape().begin() + axis + 1, data.shape().end());
    Tensor out = ctx.allocate_output(0, data.dtype(), out_shape);

    std::int64_t outer = 1, inner = 1;
    for (std::int64_t d = 0; d < axis; ++d) outer *= data.shape()[d];
    for (std::int64_t d = axis + 1; d < data.rank(); ++d) inner *= data.shape()[d];
    const std::int64_t slice = inner * static_cast<std::int64_t>(dtype_size(data.dtype()));
    const auto count = static_cast<std::int64_t>(idx.size());
    const std::byte* src = detail::bytes_of(data);
    std::byte* dst = detail::bytes_of(out);
    for (std::int64_t o = 0; o < outer; ++o) {
      for (std::int64_t k = 0; k < count; ++k) {
        std::memcpy(dst + (o * count + k) * slice, src + (o * extent + idx[k]) * slice,
                    static_cast<std::size_t>(slice));
      }
    }
    ctx.outputs[0] = std::move(out);
  }

 private:
  std::int64_t axis_;
};

}  // namespace

RW_REGISTER_KERNEL("Gather", Device::kCpu, make_factory<GatherKernel>());

}  // namespace redwood::cpu
