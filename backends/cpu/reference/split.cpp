// Split: cuts the input along `axis` into one piece per node output. The sizes come from the
// `split` attribute (opset < 13) or the optional `split` input (opset >= 13); without them the
// axis is cut into equal parts (opset 18's num_outputs allows a smaller last part). Any dtype.

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/shape_copy.hpp"

#include <fmt/ranges.h>

namespace redwood::cpu {
namespace {

class SplitKernel final : public Kernel {
 public:
  SplitKernel(const Node& node, const KernelInfo& info)
      : axis_(node.attr_int("axis", 0)), split_from_input_(info.opset >= 13), opset_(info.opset) {
    if (split_from_input_) {
      if (info.input_dtypes.size() > 1) {
        expect_dtype(node, info.input_dtypes[1], {DType::kI64, DType::kI32}, "split");
      }
    } else {
      RW_EXPECTS(node.inputs.size() <= 1, InvalidArgument,
                 "{}: Split before opset 13 takes one input ('split' is an attribute)",
                 node.where());
      split_attr_ = node.attr_ints("split");
    }
    RW_EXPECTS(!node.outputs.empty(), InvalidArgument, "{}: Split has no outputs", node.where());
    if (node.has_attr("num_outputs")) {
      RW_EXPECTS(node.attr_int("num_outputs", 0) == static_cast<std::int64_t>(node.outputs.size()),
                 InvalidArgument, "{}: num_outputs is {} but the node has {} outputs", node.where(),
                 node.attr_int("num_outputs", 0), node.outputs.size());
    }
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor x = ctx.input(0).contiguous();
    RW_EXPECTS(x.rank() > 0, InvalidArgument, "{}: cannot split a scalar", node.where());
    const std::int64_t axis = normalize_axis(axis_, x.rank());
    const std::int64_t extent = x.shape()[axis];
    const auto n = static_cast<std::int64_t>(ctx.num_outputs());

    std::vector<std::int64_t> sizes = split_attr_;
    if (split_from_input_ && ctx.has_input(1)) sizes = ctx.inputs[1].to_int64_vector();
    if (sizes.empty()) {
      if (extent % n == 0) {
        sizes.assign(static_cast<std::size_t>(n), extent / n);
      } else {
        // Opset 18: parts of ceil(extent / n), the last one smaller. Before, it must divide.
        RW_EXPECTS(opset_ >= 18, InvalidArgument,
                   "{}: axis {} of {} (extent {}) does not split into {} equal parts", node.where(),
                   axis, x.description(), extent, n);
        const std::int64_t part = (extent + n - 1) / n;
        for (std::int64_t i = 0, left = extent; i < n; ++i, left -= part) {
          sizes.push_back(std::max<std::int64_t>(0, std::min(part, left)));
        }
      }
    }
    std::int64_t sum = 0;
    for (std::int64_t s : sizes) {
      RW_EXPECTS(s >= 0, InvalidArgument, "{}: negative split size in [{}]", node.where(),
                 fmt::join(sizes, ", "));
      sum += s;
    }
    RW_EXPECTS(static_cast<std::int64_t>(sizes.size()) == n && sum == extent, InvalidArgument,
               "{}: split [{}] must have {} entries summing to {} (axis {} of {})", node.where(),
               fmt::join(sizes, ", "), n, extent, axis, x.description());

    const std::size_t elem = dtype_size(x.dtype());
    std::int64_t outer = 1, inner = 1;
    for (std::int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
    for (std::int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.shape()[d];
    const std::int64_t in_block = extent * inner * static_cast<std::int64_t>(elem);
    const std::byte* src = detail::bytes_of(x);
    std::int64_t offset = 0;  // bytes into each input block
    for (std::int64_t i = 0; i < n; ++i) {
      Shape shape = x.shape();
      shape[axis] = sizes[i];
      Tensor out = ctx.allocate_output(static_cast<std::size_t>(i), x.dtype(), shape);
      const std::int64_t block = sizes[i] * inner * static_cast<std::int64_t>(elem);
      std::byte* dst = detail::bytes_of(out);
      for (std::int64_t o = 0; o < outer; ++o) {
        std::memcpy(dst + o * block, src + o * in_block + offset, static_cast<std::size_t>(block));
      }
      offset += block;
      ctx.outputs[i] = std::move(out);
    }
  }

 private:
  std::int64_t axis_;
  bool split_from_input_;
  std::int64_t opset_;
  std::vector<std::int64_t> split_attr_;
};

}  // namespace

RW_REGISTER_KERNEL("Split", Device::kCpu, make_factory<SplitKernel>());

}  // namespace redwood::cpu
