// Pad: grows (or, with negative pads, crops) each dimension, in mode constant, reflect or edge.
//
// opset < 11: `pads` (opset 1: `paddings`) and `value` (float) are attributes.
// opset >= 11: `pads` is an int64 input, `constant_value` an optional scalar input of the data's
// type (default 0); opset 18 adds an optional `axes` input naming the padded axes.
// pads = [begin_0, begin_1, ..., end_0, end_1, ...]. Any dtype: elements are copied as bytes.
//
// Each output dimension gets a map from output index to input index (or -1: the constant). Reflect
// mirrors without repeating the edge (numpy's 'reflect'), periodically when the pad exceeds the
// extent; edge repeats the border element.

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/shape_copy.hpp"

#include <fmt/ranges.h>

namespace redwood::cpu {
namespace {

enum class PadMode { kConstant, kReflect, kEdge };

class PadKernel final : public Kernel {
 public:
  PadKernel(const Node& node, const KernelInfo& info) : from_inputs_(info.opset >= 11) {
    const std::string mode = node.attr_string("mode", "constant");
    if (mode == "constant") {
      mode_ = PadMode::kConstant;
    } else if (mode == "reflect") {
      mode_ = PadMode::kReflect;
    } else if (mode == "edge") {
      mode_ = PadMode::kEdge;
    } else {
      throw Unsupported(
          fmt::format("{}: mode '{}' is not supported (supported: constant, reflect, edge)",
                      node.where(), mode));
    }
    if (from_inputs_) {
      if (info.input_dtypes.size() > 1)
        expect_dtype(node, info.input_dtypes[1], {DType::kI64}, "pads");
      if (info.input_dtypes.size() > 2 && info.input_dtypes[0] != DType::kUndefined &&
          info.input_dtypes[2] != DType::kUndefined) {
        RW_EXPECTS(info.input_dtypes[2] == info.input_dtypes[0], InvalidArgument,
                   "{}: constant_value has type {} but data is {}", node.where(),
                   dtype_name(info.input_dtypes[2]), dtype_name(info.input_dtypes[0]));
      }
      if (info.input_dtypes.size() > 3) {
        expect_dtype(node, info.input_dtypes[3], {DType::kI64, DType::kI32}, "axes");
      }
    } else {
      RW_EXPECTS(node.inputs.size() <= 1, InvalidArgument,
                 "{}: Pad before opset 11 takes one input (pads/value are attributes)",
                 node.where());
      const char* key = node.has_attr("paddings") ? "paddings" : "pads";
      RW_EXPECTS(node.has_attr(key), InvalidArgument, "{}: attribute 'pads' is required",
                 node.where());
      pads_attr_ = node.attr_ints(key);
      value_attr_ = node.attr_float("value", 0.0f);
    }
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor x = ctx.input(0).contiguous();
    const std::int64_t rank = x.rank();
    const std::size_t elem = dtype_size(x.dtype());

    // Per-axis begin/end pads.
    std::vector<std::int64_t> pads = from_inputs_ ? ctx.input(1).to_int64_vector() : pads_attr_;
    std::vector<std::int64_t> axes;
    if (from_inputs_ && ctx.has_input(3)) {
      axes = ctx.inputs[3].to_int64_vector();
    } else {
      for (std::int64_t d = 0; d < rank; ++d) axes.push_back(d);
    }
    RW_EXPECTS(pads.size() == 2 * axes.size(), InvalidArgument,
               "{}: pads [{}] must have {} entries (2 per padded axis of {})", node.where(),
               fmt::join(pads, ", "), 2 * axes.size(), x.description());
    std::vector<std::int64_t> begin(static_cast<std::size_t>(rank), 0), end(begin);
    for (std::size_t i = 0; i < axes.size(); ++i) {
      const auto axis = static_cast<std::size_t>(normalize_axis(axes[i], rank));
      begin[axis] = pads[i];
      end[axis] = pads[i + axes.size()];
    }

    // The constant's bytes in the data's type.
    Tensor value;
    if (from_inputs_ && ctx.has_input(2) && ctx.inputs[2].numel() > 0) {
      value = ctx.inputs[2].contiguous();
      RW_EXPECTS(value.dtype() == x.dtype() && value.numel() == 1, InvalidArgument,
                 "{}: constant_value must be a scalar of type {}, got {}", node.where(),
                 dtype_name(x.dtype()), value.description());
    } else {
      value = Tensor::scalar<float>(from_inputs_ ? 0.0f : value_attr_).cast(x.dtype());
    }

    Shape out_shape(static_cast<std::size_t>(rank));
    for (std::size_t d = 0; d < out_shape.size(); ++d) {
      const std::int64_t n = x.shape()[d];
      // Pads come from the model (constant folding runs this at load): a sum that wraps is an error.
      RW_EXPECTS(!__builtin_add_overflow(n, begin[d], &out_shape[d]) &&
                     !__builtin_add_overflow(out_shape[d], end[d], &out_shape[d]) && out_shape[d] >= 0,
                 InvalidArgument, "{}: pads [{}] make axis {} of {} below zero or past 2^63", node.where(),
                 fmt::join(pads, ", "), d, x.description());
      if (out_shape[d] > 0 && n == 0) {
        RW_EXPECTS(mode_ == PadMode::kConstant, InvalidArgument,
                   "{}: cannot pad the empty axis {} of {} in mode {}", node.where(), d,
                   x.description(), mode_ == PadMode::kReflect ? "reflect" : "edge");
      }
    }

    // The output first: its size is checked (and its allocation fails as an error naming the node)
    // before the index maps, whose lengths are the output's extents, are made.
    Tensor y = ctx.allocate_output(0, x.dtype(), out_shape);
    const std::int64_t total = y.numel();
    if (total > 0) {
      std::vector<std::vector<std::int64_t>> maps(static_cast<std::size_t>(rank));
      for (std::size_t d = 0; d < out_shape.size(); ++d) {
        maps[d].resize(static_cast<std::size_t>(out_shape[d]));
        for (std::int64_t o = 0; o < out_shape[d]; ++o) maps[d][o] = source_index(o - begin[d], x.shape()[d]);
      }
      const Strides in_strides = x.strides();
      const std::int64_t inner = rank == 0 ? 1 : out_shape.back();
      const std::int64_t rows = total / inner;
      const std::byte* src = detail::bytes_of(x);
      const std::byte* fill = detail::bytes_of(value);
      std::byte* dst = detail::bytes_of(y);
      const std::vector<std::int64_t> scalar_map{0};
      const std::vector<std::int64_t>& inner_map = rank == 0 ? scalar_map : maps.back();
      parallel_for(rows, std::max<std::int64_t>(1, 4096 / std::max<std::int64_t>(inner, 1)),
                   [&](std::int64_t r0, std::int64_t r1) {
                     for (std::int64_t row = r0; row < r1; ++row) {
                       std::byte* out_row = dst + row * inner * static_cast<std::int64_t>(elem);
                       // Where the row starts in the input, or -1 when an outer index lies in the
                       // padding.
                       std::int64_t base = 0, rem = row;
                       for (std::int64_t d = rank - 1; d-- > 0;) {
                         const std::int64_t idx = maps[d][rem % out_shape[d]];
                         rem /= out_shape[d];
                         if (idx < 0) {
                           base = -1;
                           break;
                         }
                         base += idx * in_strides[d];
                       }
                       for (std::int64_t i = 0; i < inner; ++i) {
                         const std::int64_t j = inner_map[i];
                         const std::byte* from =
                             base < 0 || j < 0 ? fill
                                               : src + (base + j) * static_cast<std::int64_t>(elem);
                         std::memcpy(out_row + i * static_cast<std::int64_t>(elem), from, elem);
                       }
                     }
                   });
    }
    ctx.outputs[0] = std::move(y);
  }

 private:
  /// Input index read for position i (relative to the input's start) of an axis of extent n.
  std::int64_t source_index(std::int64_t i, std::int64_t n) const {
    if (i >= 0 && i < n) return i;
    switch (mode_) {
      case PadMode::kConstant:
        return -1;
      case PadMode::kEdge:
        return i < 0 ? 0 : n - 1;
      case PadMode::kReflect: {
        if (n == 1) return 0;
        const std::int64_t period = 2 * (n - 1);
        std::int64_t m = i % period;
        if (m < 0) m += period;
        return m < n ? m : period - m;
      }
    }
    return -1;
  }

  bool from_inputs_;
  PadMode mode_ = PadMode::kConstant;
  std::vector<std::int64_t> pads_attr_;
  float value_attr_ = 0.0f;
};

}  // namespace

RW_REGISTER_KERNEL("Pad", Device::kCpu, make_factory<PadKernel>());

}  // namespace redwood::cpu
