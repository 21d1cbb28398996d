// ArgMax, ArgMin (ONNX opsets 1-13) and TopK (opsets 1-11): positions of the extremes along one
// axis, as int64.
//   ArgMax/ArgMin: axis (default 0), keepdims (default 1), select_last_index (opset 12+, default
//   0: the first of equal extremes, 1: the last). A NaN counts as the extreme, as in numpy.
//   TopK: the k largest (largest = 1, the default) or smallest values along axis (default -1)
//   and their indices; k is an attribute before opset 10 and a 1-element int64 input from then
//   on; largest and sorted arrive in opset 11. Equal values come in the order of their indices,
//   as the spec asks; the result is always sorted (sorted = 0 leaves the order open). NaN ranks
//   above every number.
// Types: float, int64, int32, uint8.

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/reduce_plan.hpp"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

namespace redwood::cpu {
namespace {

void expect_data_dtype(const Node& node, DType dtype, const char* what) {
  expect_dtype(node, dtype, {DType::kF32, DType::kI64, DType::kI32, DType::kU8}, what);
}

/// a ranks above b: greater, with NaN above every number (a strict weak order, for sorting).
template <typename T>
bool ranks_above(T a, T b) {
  if (a != a) return b == b;
  return a > b;
}

/// a ranks below b: less, with NaN below every number (ArgMin, like numpy's argmin, picks the
/// first NaN).
template <typename T>
bool ranks_below(T a, T b) {
  if (a != a) return b == b;
  return a < b;
}

class ArgExtremeKernel final : public Kernel {
 public:
  ArgExtremeKernel(const Node& node, const KernelInfo& info, bool max)
      : max_(max),
        axis_(node.attr_int("axis", 0)),
        keepdims_(node.attr_int("keepdims", 1) != 0),
        select_last_(node.attr_int("select_last_index", 0) != 0) {
    expect_data_dtype(node, info.input_dtypes.empty() ? DType::kUndefined : info.input_dtypes[0], "data");
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor x = ctx.input(0).contiguous();
    expect_data_dtype(node, x.dtype(), "data");
    const std::int64_t axis = node_axis(node, axis_, x.shape());
    const AxisSplit s = split_at_axis(x.shape(), axis);
    std::vector<bool> reduced(x.shape().size(), false);
    reduced[static_cast<std::size_t>(axis)] = true;
    Tensor y = ctx.allocate_output(0, DType::kI64, reduced_shape(x.shape(), reduced, keepdims_));
    ctx.outputs[0] = y;
    if (y.numel() == 0) return;
    RW_EXPECTS(s.length > 0, InvalidArgument, "{}: axis {} of data {} is empty; it has no {}", node.where(),
               axis, shape_str(x.shape()), max_ ? "maximum" : "minimum");
    dispatch<float, std::int64_t, std::int32_t, std::uint8_t>(x.dtype(), node, [&](auto tag) {
      using T = decltype(tag);
      const T* xp = x.data<T>();
      std::int64_t* yp = y.data<std::int64_t>();
      parallel_for(s.outer, std::max<std::int64_t>(1, 16384 / (s.length * s.inner)),
                   [&](std::int64_t begin, std::int64_t end) {
                     std::vector<T> best(static_cast<std::size_t>(s.inner));
                     for (std::int64_t o = begin; o < end; ++o) {
                       const T* src = xp + o * s.length * s.inner;
                       std::int64_t* dst = yp + o * s.inner;
                       std::copy(src, src + s.inner, best.begin());
                       std::fill(dst, dst + s.inner, 0);
                       for (std::int64_t l = 1; l < s.length; ++l) {
                         for (std::int64_t i = 0; i < s.inner; ++i) {
                           const T v = src[l * s.inner + i];
                           const bool better = max_ ? ranks_above(v, best[i]) : ranks_below(v, best[i]);
                           if (better || (select_last_ && v == best[i])) {
                             best[i] = v;
                             dst[i] = l;
                           }
                         }
                       }
                     }
                   });
    });
  }

 private:
  bool max_;
  std::int64_t axis_;
  bool keepdims_;
  bool select_last_;
};

class TopKKernel final : public Kernel {
 public:
  TopKKernel(const Node& node, const KernelInfo& info)
      : k_from_input_(info.opset >= 10),
        k_(node.attr_int("k", -1)),
        axis_(node.attr_int("axis", -1)),
        largest_(node.attr_int("largest", 1) != 0) {
    expect_data_dtype(node, info.input_dtypes.empty() ? DType::kUndefined : info.input_dtypes[0], "X");
    RW_EXPECTS(node.outputs.size() == 2, InvalidArgument, "{}: has {} outputs; TopK has two (Values, Indices)",
               node.where(), node.outputs.size());
    if (k_from_input_) {
      RW_EXPECTS(node.has_input(1), InvalidArgument, "{}: needs the input K (opset {})", node.where(),
                 info.opset);
      if (info.input_dtypes.size() > 1) expect_dtype(node, info.input_dtypes[1], {DType::kI64}, "K");
    } else {
      RW_EXPECTS(k_ >= 0, InvalidArgument, "{}: needs a non-negative attribute k (opset {}), got {}",
                 node.where(), info.opset, k_);
    }
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor x = ctx.input(0).contiguous();
    expect_data_dtype(node, x.dtype(), "X");
    std::int64_t k = k_;
    if (k_from_input_) {
      const Tensor& kt = ctx.input(1);
      RW_EXPECTS(kt.dtype() == DType::kI64 && kt.rank() <= 1 && kt.numel() == 1, InvalidArgument,
                 "{}: K {} must be one int64 value", node.where(), kt.description());
      k = kt.to_int64_vector()[0];
    }
    const std::int64_t axis = node_axis(node, axis_, x.shape());
    const AxisSplit s = split_at_axis(x.shape(), axis);
    RW_EXPECTS(k >= 0 && k <= s.length, InvalidArgument, "{}: k = {} is out of range for axis {} of X {}",
               node.where(), k, axis, shape_str(x.shape()));
    Shape out_shape = x.shape();
    out_shape[static_cast<std::size_t>(axis)] = k;
    Tensor values = ctx.allocate_output(0, x.dtype(), out_shape);
    Tensor indices = ctx.allocate_output(1, DType::kI64, out_shape);
    ctx.outputs[0] = values;
    ctx.outputs[1] = indices;
    if (values.numel() == 0) return;
    dispatch<float, std::int64_t, std::int32_t, std::uint8_t>(x.dtype(), node, [&](auto tag) {
      using T = decltype(tag);
      const T* xp = x.data<T>();
      T* vp = values.data<T>();
      std::int64_t* ip = indices.data<std::int64_t>();
      // One slice per (outer, inner) position.
      parallel_for(s.outer * s.inner, std::max<std::int64_t>(1, 4096 / s.length),
                   [&](std::int64_t begin, std::int64_t end) {
                     std::vector<std::int64_t> order(static_cast<std::size_t>(s.length));
                     for (std::int64_t slice = begin; slice < end; ++slice) {
                       const std::int64_t o = slice / s.inner, i = slice % s.inner;
                       const T* src = xp + o * s.length * s.inner + i;
                       auto at = [&](std::int64_t l) { return src[l * s.inner]; };
                       std::iota(order.begin(), order.end(), std::int64_t{0});
                       auto first = [&](std::int64_t a, std::int64_t b) {
                         const bool above = largest_ ? ranks_above(at(a), at(b)) : ranks_above(at(b), at(a));
                         const bool below = largest_ ? ranks_above(at(b), at(a)) : ranks_above(at(a), at(b));
                         return above || (!below && a < b);
                       };
                       std::partial_sort(order.begin(), order.begin() + k, order.end(), first);
                       const std::int64_t out = o * k * s.inner + i;
                       for (std::int64_t j = 0; j < k; ++j) {
                         vp[out + j * s.inner] = at(order[static_cast<std::size_t>(j)]);
                         ip[out + j * s.inner] = order[static_cast<std::size_t>(j)];
                       }
                     }
                   });
    });
  }

 private:
  bool k_from_input_;
  std::int64_t k_;
  std::int64_t axis_;
  bool largest_;
};

KernelFactory arg_extreme_factory(bool max) {
  return [max](const Node& node, const KernelInfo& info) -> std::unique_ptr<Kernel> {
    return std::make_unique<ArgExtremeKernel>(node, info, max);
  };
}

}  // namespace

RW_REGISTER_KERNEL("ArgMax", Device::kCpu, arg_extreme_factory(true));
RW_REGISTER_KERNEL("ArgMin", Device::kCpu, arg_extreme_factory(false));
RW_REGISTER_KERNEL("TopK", Device::kCpu, make_factory<TopKKernel>());

}  // namespace redwood::cpu
