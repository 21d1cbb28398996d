// Trilu (opset 14): keeps the upper (upper = 1, the default) or lower (upper = 0) triangle of each
// matrix in the last two dimensions and zeroes the rest. Element (i, j) is kept when j - i >= k
// (upper) or j - i <= k (lower); k is the optional second input (an int64 scalar, default 0).
// Any dtype: each row is a kept run of bytes and zero bytes on either side.

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/op_inputs.hpp"
#include "backends/cpu/reference/shape_copy.hpp"

#include <algorithm>
#include <cstring>

namespace redwood::cpu {
namespace {

class TriluKernel final : public Kernel {
 public:
  TriluKernel(const Node& node, const KernelInfo& info) : upper_(node.attr_int("upper", 1) != 0) {
    if (node.has_input(1)) expect_dtype(node, detail::input_dtype(info, 1), {DType::kI64}, "k");
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor x = ctx.input(0).contiguous();
    RW_EXPECTS(x.rank() >= 2, InvalidArgument, "{}: the input must have rank 2 or more, got {}",
               node.where(), x.description());
    std::int64_t k = 0;
    if (ctx.has_input(1)) {
      RW_EXPECTS(ctx.inputs[1].dtype() == DType::kI64, InvalidArgument,
                 "{}: k must be int64, got {}", node.where(), ctx.inputs[1].description());
      k = detail::scalar_int_input(node, ctx.inputs[1], "k");
    }
    const std::int64_t rows = x.shape()[x.rank() - 2], cols = x.shape()[x.rank() - 1];
    k = std::clamp(k, -rows, cols);  // beyond, every row is all kept or all zero; no overflow below
    Tensor y = ctx.allocate_output(0, x.dtype(), x.shape());
    const auto elem = static_cast<std::int64_t>(dtype_size(x.dtype()));
    const std::byte* src = detail::bytes_of(x);
    std::byte* dst = detail::bytes_of(y);
    const std::int64_t all_rows = cols == 0 ? 0 : x.numel() / cols;
    parallel_for(all_rows, std::max<std::int64_t>(1, (std::int64_t{1} << 15) / std::max<std::int64_t>(1, cols)),
                 [&](std::int64_t begin, std::int64_t end) {
                   for (std::int64_t r = begin; r < end; ++r) {
                     const std::int64_t i = r % rows;
                     // The kept columns [lo, hi) of row i.
                     const std::int64_t lo = upper_ ? std::clamp<std::int64_t>(i + k, 0, cols) : 0;
                     const std::int64_t hi = upper_ ? cols : std::clamp<std::int64_t>(i + k + 1, 0, cols);
                     const std::int64_t row = r * cols * elem;
                     std::memset(dst + row, 0, static_cast<std::size_t>(lo * elem));
                     std::memcpy(dst + row + lo * elem, src + row + lo * elem,
                                 static_cast<std::size_t>((hi - lo) * elem));
                     std::memset(dst + row + hi * elem, 0, static_cast<std::size_t>((cols - hi) * elem));
                   }
                 });
    ctx.outputs[0] = std::move(y);
  }

 private:
  bool upper_;
};

}  // namespace

RW_REGISTER_KERNEL("Trilu", Device::kCpu, make_factory<TriluKernel>());

}  // namespace redwood::cpu
