// Constant and ConstantOfShape.
//
// Constant produces its attribute: `value` (a tensor), `value_float`, `value_floats` (1-D),
// `value_int` (int64 scalar) or `value_ints` (1-D int64). `sparse_value`, `value_string` and
// `value_strings` are rejected at load (Redwood holds neither sparse nor string tensors).
//
// ConstantOfShape fills a tensor whose shape is its int64 input with the one element of its
// `value` attribute (default: float 0); the output has the value's dtype.

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/shape_copy.hpp"

#include <fmt/ranges.h>

namespace redwood::cpu {
namespace {

class ConstantKernel final : public Kernel {
 public:
  ConstantKernel(const Node& node, const KernelInfo&) {
    for (const char* key : {"sparse_value", "value_string", "value_strings"}) {
      RW_EXPECTS(!node.has_attr(key), Unsupported, "{}: attribute '{}' is not supported",
                 node.where(), key);
    }
    int found = 0;
    if (node.has_attr("value")) {
      value_ = node.attr_tensor("value");
      ++found;
    }
    if (node.has_attr("value_float")) {
      value_ = Tensor::scalar<float>(node.attr_float("value_float", 0.0f));
      ++found;
    }
    if (node.has_attr("value_floats")) {
      const std::vector<float> v = node.attr_floats("value_floats");
      value_ = Tensor::from_vector<float>({static_cast<std::int64_t>(v.size())}, v);
      ++found;
    }
    if (node.has_attr("value_int")) {
      value_ = Tensor::scalar<std::int64_t>(node.attr_int("value_int", 0));
      ++found;
    }
    if (node.has_attr("value_ints")) {
      const std::vector<std::int64_t> v = node.attr_ints("value_ints");
      value_ = Tensor::from_vector<std::int64_t>({static_cast<std::int64_t>(v.size())}, v);
      ++found;
    }
    RW_EXPECTS(found == 1, InvalidArgument,
               "{}: exactly one of value, value_float(s), value_int(s) must be given ({} found)",
               node.where(), found);
  }

  void run(KernelContext& ctx) override { ctx.outputs[0] = value_; }

 private:
  Tensor value_;
};

class ConstantOfShapeKernel final : public Kernel {
 public:
  ConstantOfShapeKernel(const Node& node, const KernelInfo& info) {
    if (!info.input_dtypes.empty())
      expect_dtype(node, info.input_dtypes[0], {DType::kI64}, "shape");
    if (node.has_attr("value")) {
      value_ = node.attr_tensor("value").contiguous();
      RW_EXPECTS(value_.numel() == 1, InvalidArgument,
                 "{}: attribute 'value' must hold one element, got {}", node.where(),
                 value_.description());
    } else {
      value_ = Tensor::scalar<float>(0.0f);
    }
  }

  void run(KernelContext& ctx) override {
    const std::vector<std::int64_t> dims = ctx.input(0).to_int64_vector();
    for (std::int64_t d : dims) {
      RW_EXPECTS(d >= 0, InvalidArgument, "{}: shape [{}] has a negative extent", ctx.node.where(),
                 fmt::join(dims, ", "));
    }
    Tensor y = ctx.allocate_output(0, value_.dtype(), Shape(dims.begin(), dims.end()));
    detail::fill_bytes(detail::bytes_of(y), detail::bytes_of(value_), dtype_size(value_.dtype()),
                       y.numel());
    ctx.outputs[0] = std::move(y);
  }

 private:
  Tensor value_;
};

}  // namespace

RW_REGISTER_KERNEL("Constant", Device::kCpu, make_factory<ConstantKernel>());
RW_REGISTER_KERNEL("ConstantOfShape", Device::kCpu, make_factory<ConstantOfShapeKernel>());

}  // namespace redwood::cpu
