// Slice: takes starts[i]:ends[i]:steps[i] along axes[i], numpy-style.
//
// opset < 10: starts, ends and (optional) axes are attributes; steps are 1.
// opset >= 10: they are inputs (int32 or int64): starts, ends, optional axes, optional steps.
//
// Per the spec, for each sliced axis of extent d: a negative start or end has d added; then with
// step > 0 start and end are clamped to [0, d], with step < 0 start to [0, d-1] and end to
// [-1, d-1] (so that ends of INT_MIN mean "through the first element"). A step of 0 is an error.
// The output is the input read through scaled strides; any dtype.

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/shape_copy.hpp"

#include <algorithm>
#include <limits>

#include <fmt/ranges.h>

namespace redwood::cpu {
namespace {

class SliceKernel final : public Kernel {
 public:
  SliceKernel(const Node& node, const KernelInfo& info) : from_inputs_(info.opset >= 10) {
    if (from_inputs_) {
      for (std::size_t i = 1; i < info.input_dtypes.size() && i < 5; ++i) {
        expect_dtype(node, info.input_dtypes[i], {DType::kI64, DType::kI32}, kInputNames[i]);
      }
    } else {
      RW_EXPECTS(node.inputs.size() <= 1, InvalidArgument,
                 "{}: Slice before opset 10 takes one input (starts/ends/axes are attributes)",
                 node.where());
      RW_EXPECTS(node.has_attr("starts") && node.has_attr("ends"), InvalidArgument,
                 "{}: attributes 'starts' and 'ends' are required", node.where());
      starts_ = node.attr_ints("starts");
      ends_ = node.attr_ints("ends");
      axes_ = node.attr_ints("axes");
    }
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor& x = ctx.input(0);
    const std::int64_t rank = x.rank();
    // The run's parameters in the kernel's own vectors, reused from run to run: a Slice in a
    // model runs for every frame, and its parameters are a handful of integers.
    std::vector<std::int64_t>&starts = run_starts_, &ends = run_ends_, &axes = run_axes_, &steps = run_steps_;
    steps.clear();
    if (from_inputs_) {
      read_ints(ctx.input(1), starts);
      read_ints(ctx.input(2), ends);
      axes.clear();
      if (ctx.has_input(3)) read_ints(ctx.inputs[3], axes);
      if (ctx.has_input(4)) read_ints(ctx.inputs[4], steps);
    } else {
      starts.assign(starts_.begin(), starts_.end());
      ends.assign(ends_.begin(), ends_.end());
      axes.assign(axes_.begin(), axes_.end());
    }
    if (axes.empty()) {
      for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<std::int64_t>(i));
    }
    if (steps.empty()) steps.assign(starts.size(), 1);
    RW_EXPECTS(ends.size() == starts.size() && axes.size() == starts.size() &&
                   steps.size() == starts.size(),
               InvalidArgument,
               "{}: starts [{}], ends [{}], axes [{}], steps [{}] differ in length", node.where(),
               fmt::join(starts, ", "), fmt::join(ends, ", "), fmt::join(axes, ", "),
               fmt::join(steps, ", "));

    // Start at the full tensor; each sliced axis gets an offset, an extent and a stride factor.
    Shape out_shape = x.shape();
    Strides strides = x.strides();
    std::int64_t offset = 0;  // elements
    RW_EXPECTS(rank <= 64, Unsupported, "{}: a rank-{} input; Slice takes up to 64 axes", node.where(), rank);
    std::uint64_t seen = 0;  // a bit per axis
    for (std::size_t i = 0; i < starts.size(); ++i) {
      RW_EXPECTS(axes[i] >= -rank && axes[i] < rank, InvalidArgument,
                 "{}: axis {} is out of range for input {}", node.where(), axes[i],
                 x.description());
      const auto axis = static_cast<std::size_t>(axes[i] < 0 ? axes[i] + rank : axes[i]);
      RW_EXPECTS(!(seen >> axis & 1), InvalidArgument, "{}: axis {} is sliced twice (axes [{}])",
                 node.where(), axis, fmt::join(axes, ", "));
      seen |= std::uint64_t{1} << axis;
      const std::int64_t step = steps[i];
      RW_EXPECTS(step != 0, InvalidArgument, "{}: step 0 on axis {}", node.where(), axis);
      const std::int64_t dim = x.shape()[axis];
      std::int64_t start = starts[i], end = ends[i];
      if (start < 0) start += dim;
      if (end < 0) end += dim;
      std::int64_t count;
      if (step > 0) {
        start = std::clamp<std::int64_t>(start, 0, dim);
        end = std::clamp<std::int64_t>(end, 0, dim);
        count = end > start ? (end - start - 1) / step + 1 : 0;  // ceil, without overflow
      } else if (dim == 0) {
        count = 0;
      } else {
        start = std::clamp<std::int64_t>(start, 0, dim - 1);
        end = std::clamp<std::int64_t>(end, -1, dim - 1);
        const std::int64_t magnitude =
            step == std::numeric_limits<std::int64_t>::min() ? dim + 1 : -step;
        count = start > end ? (start - end - 1) / magnitude + 1 : 0;
      }
      out_shape[axis] = count;
      if (count > 0) offset += start * x.strides()[axis];
      // With one element or none the stride is never stepped (and a huge step would overflow).
      if (count > 1) strides[axis] = x.strides()[axis] * step;
    }

    Tensor y = ctx.allocate_output(0, x.dtype(), out_shape);
    const std::size_t elem = dtype_size(x.dtype());
    if (y.numel() > 0) {
      detail::copy_strided(detail::bytes_of(x) + offset * static_cast<std::int64_t>(elem),
                           out_shape, strides, elem, detail::bytes_of(y));
    }
    ctx.outputs[0] = std::move(y);
  }

 private:
  // An integer input's values into `out` (an int64 tensor copied straight, others converted).
  static void read_ints(const Tensor& t, std::vector<std::int64_t>& out) {
    if (t.dtype() == DType::kI64 && t.is_contiguous()) {
      const auto* v = t.data<std::int64_t>();
      out.assign(v, v + t.numel());
    } else {
      out = t.to_int64_vector();
    }
  }

  static constexpr const char* kInputNames[] = {"data", "starts", "ends", "axes", "steps"};
  bool from_inputs_;
  std::vector<std::int64_t> starts_, ends_, axes_;
  std::vector<std::int64_t> run_starts_, run_ends_, run_axes_, run_steps_;
};

}  // namespace

RW_REGISTER_KERNEL("Slice", Device::kCpu, make_factory<SliceKernel>());

}  // namespace redwood::cpu
