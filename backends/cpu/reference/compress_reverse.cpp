// Compress and ReverseSequence: select or reorder slices of a tensor along an axis. Any dtype:
// slices are copied as bytes.
//
// Compress (opset 9, 11): keeps the slices along `axis` whose entry in `condition` (a 1-D bool
// tensor) is true; without `axis` the input is flattened first and the output is 1-D. A condition
// shorter than the axis drops the slices past its end; a longer one may only be false there.
// Negative axes count from the back (opset 11).
//
// ReverseSequence (opset 10): for each batch entry b (along `batch_axis`, default 1), reverses the
// first sequence_lens[b] slices along `time_axis` (default 0) and keeps the rest in place. The two
// axes are 0 and 1 in either order; sequence_lens is int64 with one entry per batch entry, each in
// [0, time extent].

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/op_inputs.hpp"
#include "backends/cpu/reference/shape_copy.hpp"

#include <cstring>
#include <optional>

namespace redwood::cpu {
namespace {

class CompressKernel final : public Kernel {
 public:
  CompressKernel(const Node& node, const KernelInfo& info) {
    if (node.has_attr("axis")) axis_ = node.attr_int("axis", 0);
    expect_dtype(node, detail::input_dtype(info, 1), {DType::kBool}, "condition");
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor x = ctx.input(0).contiguous();
    const Tensor condition = ctx.input(1).contiguous();
    RW_EXPECTS(condition.dtype() == DType::kBool && condition.rank() == 1, InvalidArgument,
               "{}: condition must be a 1-D bool tensor, got {}", node.where(),
               condition.description());
    // x as [outer, extent, inner] around the axis (the flattened input: [1, numel, 1]).
    std::int64_t axis = 0, outer = 1, extent = x.numel(), inner = 1;
    if (axis_) {
      RW_EXPECTS(x.rank() > 0, InvalidArgument, "{}: a scalar has no axis {}", node.where(), *axis_);
      axis = detail::node_axis(node, *axis_, x.rank());
      extent = x.shape()[axis];
      for (std::int64_t d = 0; d < x.rank(); ++d) {
        if (d < axis) outer *= x.shape()[d];
        if (d > axis) inner *= x.shape()[d];
      }
    }
    const bool* keep = condition.data<bool>();
    std::vector<std::int64_t> kept;
    for (std::int64_t i = 0; i < condition.numel(); ++i) {
      if (!keep[i]) continue;
      RW_EXPECTS(i < extent, InvalidArgument,
                 "{}: condition is true at {}, past the extent {} of {}", node.where(), i, extent,
                 axis_ ? fmt::format("axis {} of {}", axis, x.description()) : x.description());
      kept.push_back(i);
    }
    const auto count = static_cast<std::int64_t>(kept.size());
    Shape out_shape{count};
    if (axis_) {
      out_shape = x.shape();
      out_shape[axis] = count;
    }
    Tensor y = ctx.allocate_output(0, x.dtype(), out_shape);
    const std::int64_t slice = inner * static_cast<std::int64_t>(dtype_size(x.dtype()));
    const std::byte* src = detail::bytes_of(x);
    std::byte* dst = detail::bytes_of(y);
    parallel_for(outer * count, std::max<std::int64_t>(1, (std::int64_t{1} << 15) / std::max<std::int64_t>(1, slice)),
                 [&](std::int64_t begin, std::int64_t end) {
                   for (std::int64_t j = begin; j < end; ++j) {
                     const std::int64_t o = j / count, k = kept[static_cast<std::size_t>(j % count)];
                     std::memcpy(dst + j * slice, src + (o * extent + k) * slice,
                                 static_cast<std::size_t>(slice));
                   }
                 });
    ctx.outputs[0] = std::move(y);
  }

 private:
  std::optional<std::int64_t> axis_;  // none: the flattened input
};

class ReverseSequenceKernel final : public Kernel {
 public:
  ReverseSequenceKernel(const Node& node, const KernelInfo& info)
      : batch_axis_(node.attr_int("batch_axis", 1)), time_axis_(node.attr_int("time_axis", 0)) {
    const bool ok = (batch_axis_ == 0 && time_axis_ == 1) || (batch_axis_ == 1 && time_axis_ == 0);
    RW_EXPECTS(ok, InvalidArgument, "{}: batch_axis {} and time_axis {} must be 0 and 1",
               node.where(), batch_axis_, time_axis_);
    expect_dtype(node, detail::input_dtype(info, 1), {DType::kI64}, "sequence_lens");
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor x = ctx.input(0).contiguous();
    const Tensor& lens_input = ctx.input(1);
    RW_EXPECTS(x.rank() >= 2, InvalidArgument, "{}: the input must have rank 2 or more, got {}",
               node.where(), x.description());
    const std::int64_t batch = x.shape()[batch_axis_], time = x.shape()[time_axis_];
    RW_EXPECTS(lens_input.dtype() == DType::kI64 && lens_input.rank() == 1 &&
                   lens_input.numel() == batch,
               InvalidArgument, "{}: sequence_lens must be int64[{}] (the batch), got {}",
               node.where(), batch, lens_input.description());
    const std::vector<std::int64_t> lens = lens_input.to_int64_vector();
    for (std::int64_t len : lens) {
      RW_EXPECTS(len >= 0 && len <= time, InvalidArgument,
                 "{}: sequence length {} is outside [0, {}] (the time axis of {})", node.where(),
                 len, time, x.description());
    }
    Tensor y = ctx.allocate_output(0, x.dtype(), x.shape());
    const std::int64_t slice =
        x.numel() == 0 ? 0 : x.numel() / (batch * time) * static_cast<std::int64_t>(dtype_size(x.dtype()));
    // Slice (b, t) starts at b·batch_stride + t·time_stride slices.
    const std::int64_t batch_stride = batch_axis_ == 0 ? time : 1;
    const std::int64_t time_stride = time_axis_ == 0 ? batch : 1;
    const std::byte* src = detail::bytes_of(x);
    std::byte* dst = detail::bytes_of(y);
    parallel_for(batch * time, std::max<std::int64_t>(1, (std::int64_t{1} << 15) / std::max<std::int64_t>(1, slice)),
                 [&](std::int64_t begin, std::int64_t end) {
                   for (std::int64_t j = begin; j < end; ++j) {
                     const std::int64_t b = j / time, t = j % time;
                     const std::int64_t len = lens[static_cast<std::size_t>(b)];
                     const std::int64_t from = t < len ? len - 1 - t : t;
                     std::memcpy(dst + (b * batch_stride + t * time_stride) * slice,
                                 src + (b * batch_stride + from * time_stride) * slice,
                                 static_cast<std::size_t>(slice));
                   }
                 });
    ctx.outputs[0] = std::move(y);
  }

 private:
  std::int64_t batch_axis_, time_axis_;
};

}  // namespace

RW_REGISTER_KERNEL("Compress", Device::kCpu, make_factory<CompressKernel>());
RW_REGISTER_KERNEL("ReverseSequence", Device::kCpu, make_factory<ReverseSequenceKernel>());

}  // namespace redwood::cpu
