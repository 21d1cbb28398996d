// Reshape and Flatten: same elements, new shape. The output views the input's storage (tensors
// are immutable once produced, so sharing is safe); a non-contiguous input is copied first.
//
// Reshape's target shape is an int64 input (opset >= 5) or the `shape` attribute (opset < 5).
// An entry of 0 copies the input's extent at that position unless allowzero=1 (opset 14), in
// which case it means an extent of 0; one entry of -1 is inferred from the element count.

#include "backends/cpu/reference/kernel_util.hpp"

#include <fmt/ranges.h>

namespace redwood::cpu {
namespace {

class ReshapeKernel final : public Kernel {
 public:
  ReshapeKernel(const Node& node, const KernelInfo& info)
      : shape_from_input_(info.opset >= 5), allow_zero_(node.attr_int("allowzero", 0) != 0) {
    if (shape_from_input_) {
      if (info.input_dtypes.size() > 1) {
        expect_dtype(node, info.input_dtypes[1], {DType::kI64, DType::kI32}, "shape");
      }
    } else {
      RW_EXPECTS(node.has_attr("shape"), InvalidArgument, "{}: attribute 'shape' is required",
                 node.where());
      shape_attr_ = node.attr_ints("shape");
    }
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor& x = ctx.input(0);
    // In a Shape (in place for up to eight extents): a Reshape runs on every batch.
    Shape requested;
    if (!shape_from_input_) {
      requested.assign(shape_attr_.begin(), shape_attr_.end());
    } else if (const Tensor& t = ctx.input(1); t.dtype() == DType::kI64 && t.is_contiguous()) {
      requested.assign(t.data<std::int64_t>(), t.data<std::int64_t>() + t.numel());
    } else {
      requested = t.to_int64_vector();
    }
    Shape shape(requested.size());
    std::int64_t inferred = -1;  // position of the -1
    std::int64_t known = 1;      // product of the other extents
    for (std::size_t i = 0; i < requested.size(); ++i) {
      std::int64_t d = requested[i];
      if (d == 0 && !allow_zero_) {
        RW_EXPECTS(i < x.shape().size(), InvalidArgument,
                   "{}: shape [{}] copies dimension {} (0) but the input {} has rank {}",
                   node.where(), fmt::join(requested, ", "), i, x.description(), x.rank());
        d = x.shape()[i];
      }
      if (d == -1) {
        RW_EXPECTS(inferred < 0, InvalidArgument, "{}: shape [{}] has more than one -1",
                   node.where(), fmt::join(requested, ", "));
        inferred = static_cast<std::int64_t>(i);
        continue;
      }
      RW_EXPECTS(d >= 0, InvalidArgument, "{}: shape [{}] has a negative extent", node.where(),
                 fmt::join(requested, ", "));
      shape[i] = d;
      known *= d;
    }
    if (inferred >= 0) {
      RW_EXPECTS(known != 0 && x.numel() % known == 0, InvalidArgument,
                 "{}: cannot infer the -1 in shape [{}] for input {}", node.where(),
                 fmt::join(requested, ", "), x.description());
      shape[inferred] = x.numel() / known;
    }
    RW_EXPECTS(shape_numel(shape) == x.numel(), InvalidArgument,
               "{}: cannot reshape {} ({} elements) to [{}] = {} ({} elements)", node.where(),
               x.description(), x.numel(), fmt::join(requested, ", "), shape_str(shape),
               shape_numel(shape));
    ctx.outputs[0] = x.contiguous().reshaped(std::move(shape));
  }

 private:
  bool shape_from_input_;
  bool allow_zero_;
  std::vector<std::int64_t> shape_attr_;
};

/// Flatten: [d0 .. d(axis-1)] x [d(axis) .. d(r-1)], axis in [-r, r] (default 1).
class FlattenKernel final : public Kernel {
 public:
  FlattenKernel(const Node& node, const KernelInfo&) : axis_(node.attr_int("axis", 1)) {}

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const std::int64_t rank = x.rank();
    RW_EXPECTS(axis_ >= -rank && axis_ <= rank, InvalidArgument,
               "{}: axis {} is out of range for input {}", ctx.node.where(), axis_,
               x.description());
    const std::int64_t axis = axis_ < 0 ? axis_ + rank : axis_;
    std::int64_t outer = 1;
    for (std::int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
    std::int64_t inner = 1;
    for (std::int64_t d = axis; d < rank; ++d) inner *= x.shape()[d];
    ctx.outputs[0] = x.contiguous().reshaped({outer, inner});
  }

 private:
  std::int64_t axis_;
};

}  // namespace

RW_REGISTER_KERNEL("Reshape", Device::kCpu, make_factory<ReshapeKernel>());
RW_REGISTER_KERNEL("Flatten", Device::kCpu, make_factory<FlattenKernel>());

}  // namespace redwood::cpu
