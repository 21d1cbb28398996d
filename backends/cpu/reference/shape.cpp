// Shape: the input's extents as a 1-D int64 tensor. From opset 15, `start` and `end` select a
// range of dimensions; negative values count from the back and both are clamped to [0, rank].

#include "backends/cpu/reference/kernel_util.hpp"

#include <algorithm>

namespace redwood::cpu {
namespace {

class ShapeKernel final : public Kernel {
 public:
  ShapeKernel(const Node& node, const KernelInfo&)
      : start_(node.attr_int("start", 0)),
        end_(node.has_attr("end") ? std::optional<std::int64_t>(node.attr_int("end", 0))
                                  : std::nullopt) {}

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const std::int64_t rank = x.rank();
    auto clamp = [rank](std::int64_t v) {
      return std::clamp<std::int64_t>(v < 0 ? v + rank : v, 0, rank);
    };
    const std::int64_t start = clamp(start_);
    const std::int64_t end = end_ ? clamp(*end_) : rank;
    std::vector<std::int64_t> dims;
    for (std::int64_t d = start; d < end; ++d) dims.push_back(x.shape()[d]);
    const auto n = static_cast<std::int64_t>(dims.size());
    ctx.outputs[0] = Tensor::from_vector<std::int64_t>({n}, dims);
  }

 private:
  std::int64_t start_;
  std::optional<std::int64_t> end_;
};

}  // namespace

RW_REGISTER_KERNEL("Shape", Device::kCpu, make_factory<ShapeKernel>());

}  // namespace redwood::cpu
