// Transpose: permutes the dimensions (perm; default: reversed). Works on any dtype by moving
// bytes: the output is the input read through permuted strides.

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/shape_copy.hpp"

#include <algorithm>
#include <numeric>

#include <fmt/ranges.h>

namespace redwood::cpu {
namespace {

class TransposeKernel final : public Kernel {
 public:
  TransposeKernel(const Node& node, const KernelInfo&) {
    if (node.has_attr("perm")) {
      perm_ = node.attr_ints("perm");
      check_permutation(node, perm_);
    }
  }

  void run(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const std::int64_t rank = x.rank();
    Shape perm(perm_.begin(), perm_.end());  // in place for up to eight axes: no allocation a run
    if (perm.empty() && !ctx.node.has_attr("perm")) {
      perm.resize(static_cast<std::size_t>(rank));
      std::iota(perm.rbegin(), perm.rend(), std::int64_t{0});
    }
    RW_EXPECTS(static_cast<std::int64_t>(perm.size()) == rank, InvalidArgument,
               "{}: perm has {} entries but the input {} has rank {}", ctx.node.where(),
               perm.size(), x.description(), rank);
    Shape out_shape(perm.size());
    Strides in_strides(perm.size());
    for (std::size_t i = 0; i < perm.size(); ++i) {
      out_shape[i] = x.shape()[static_cast<std::size_t>(perm[i])];
      in_strides[i] = x.strides()[static_cast<std::size_t>(perm[i])];
    }
    Tensor y = ctx.allocate_output(0, x.dtype(), out_shape);
    detail::copy_strided(detail::bytes_of(x), out_shape, in_strides, dtype_size(x.dtype()),
                         detail::bytes_of(y));
    ctx.outputs[0] = std::move(y);
  }

 private:
  static void check_permutation(const Node& node, const std::vector<std::int64_t>& perm) {
    std::vector<bool> seen(perm.size(), false);
    for (std::int64_t p : perm) {
      const bool ok = p >= 0 && p < static_cast<std::int64_t>(perm.size()) && !seen[p];
      RW_EXPECTS(ok, InvalidArgument, "{}: perm [{}] is not a permutation of 0..{}", node.where(),
                 fmt::join(perm, ", "), perm.size() - 1);
      seen[static_cast<std::size_t>(p)] = true;
    }
  }

  std::vector<std::int64_t> perm_;
};

}  // namespace

RW_REGISTER_KERNEL("Transpose", Device::kCpu, make_factory<TransposeKernel>());

}  // namespace redwood::cpu
