// The Reduce ops (ONNX opsets 1-22): ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd,
// ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp and ReduceSumSquare, one kernel parameterized
// by the reduction. Each folds `data` over `axes`, keeping them as extent 1 when keepdims
// (default 1).
//   Before ReduceSum's opset 13 and the others' opset 18, axes is an attribute; absent means
//   every axis (noop_with_empty_axes does not exist yet).
//   From then on, axes is an optional int64 input; absent or empty means every axis, or no
//   reduction at all (the data passed through) with noop_with_empty_axes = 1.
// A reduction over an empty set gives its identity: 0 for the sums and L1/L2, 1 for the product,
// -inf for ReduceMax, ReduceLogSum and ReduceLogSumExp (the lowest value for integers), +inf for
// ReduceMin (the highest), NaN for the mean.
// Types: float for every reduction; int64 and int32 for ReduceSum, ReduceProd, ReduceMax and
// ReduceMin; uint8 for ReduceMax and ReduceMin. Sums and products of floats are kept in double,
// of integers in int64; ReduceLogSumExp subtracts each output's maximum before exp.

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/reduce_plan.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

namespace redwood::cpu {
namespace {

enum class Reduction { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

bool takes_integers(Reduction r) {
  return r == Reduction::kSum || r == Reduction::kProd || r == Reduction::kMax || r == Reduction::kMin;
}

/// Throws Unsupported naming the node unless `data` may have type `dtype` for reduction `r`.
void expect_data_dtype(const Node& node, DType dtype, Reduction r) {
  if (r == Reduction::kMax || r == Reduction::kMin) {
    expect_dtype(node, dtype, {DType::kF32, DType::kI64, DType::kI32, DType::kU8}, "data");
  } else if (takes_integers(r)) {
    expect_dtype(node, dtype, {DType::kF32, DType::kI64, DType::kI32}, "data");
  } else {
    expect_dtype(node, dtype, {DType::kF32}, "data");
  }
}

/// v when it is NaN or better than `best` (greater: ReduceMax; less: ReduceMin), so NaN sticks.
template <bool kGreater, typename T>
T pick(T best, T v) {
  const bool better = kGreater ? v > best : v < best;
  return better || v != v ? v : best;
}

class ReduceKernel final : public Kernel {
 public:
  ReduceKernel(const Node& node, const KernelInfo& info, Reduction reduction)
      : reduction_(reduction),
        axes_from_input_(info.opset >= (reduction == Reduction::kSum ? 13 : 18)),
        keepdims_(node.attr_int("keepdims", 1) != 0),
        noop_with_empty_axes_(axes_from_input_ && node.attr_int("noop_with_empty_axes", 0) != 0) {
    expect_data_dtype(node, info.input_dtypes.empty() ? DType::kUndefined : info.input_dtypes[0],
                      reduction_);
    if (axes_from_input_) {
      if (info.input_dtypes.size() > 1) {
        expect_dtype(node, info.input_dtypes[1], {DType::kI64}, "axes");
      }
    } else {
      axes_ = node.attr_ints("axes");
    }
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor x = ctx.input(0).contiguous();
    expect_data_dtype(node, x.dtype(), reduction_);
    // The axes in a Shape (in place for up to eight), read from the input without a vector.
    Shape axes(axes_.begin(), axes_.end());
    if (axes_from_input_ && ctx.has_input(1)) {
      const Tensor& t = ctx.input(1);
      RW_EXPECTS(t.dtype() == DType::kI64 && t.rank() <= 1, InvalidArgument,
                 "{}: axes {} must be a 1-D int64 tensor", node.where(), t.description());
      const Tensor c = t.contiguous();
      axes.assign(c.data<std::int64_t>(), c.data<std::int64_t>() + c.numel());
    }
    if (axes.empty() && noop_with_empty_axes_) {
      ctx.outputs[0] = x;
      return;
    }
    // The layouts of the last few input shapes and axes are kept: a model runs the same few
    // shapes (one per batch size) batch after batch, and making a plan allocates.
    Layout* layout = nullptr;
    for (Layout& l : layouts_) {
      if (l.shape == x.shape() && l.axes == axes) layout = &l;
    }
    if (layout == nullptr) {
      const std::vector<bool> reduced = reduced_axes_mask(node, axes, x.shape());
      if (layouts_.size() >= kLayouts) layouts_.erase(layouts_.begin());  // the oldest goes
      layouts_.push_back({x.shape(), axes, reduced_shape(x.shape(), reduced, keepdims_), ReducePlan(x.shape(), reduced)});
      layout = &layouts_.back();
    }
    Tensor y = ctx.allocate_output(0, x.dtype(), layout->out);
    ctx.outputs[0] = y;
    if (y.numel() == 0) return;
    const ReducePlan& plan = layout->plan;
    dispatch<float, std::int64_t, std::int32_t, std::uint8_t>(x.dtype(), node, [&](auto tag) {
      using T = decltype(tag);
      reduce<T>(plan, x.data<T>(), y.data<T>());
    });
  }

 private:
  template <typename T>
  void reduce(const ReducePlan& plan, const T* x, T* y) const {
    // Sums and products: double for floats, int64 for integers.
    using Wide = std::conditional_t<std::is_floating_point_v<T>, double, std::int64_t>;
    constexpr T kLowest = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                               : std::numeric_limits<T>::lowest();
    constexpr T kHighest = std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                                : std::numeric_limits<T>::max();
    auto to_t = [](auto a, std::int64_t) { return static_cast<T>(a); };
    auto add = [](Wide a, T v, std::int64_t) { return a + static_cast<Wide>(v); };
    switch (reduction_) {
      case Reduction::kSum:
        return reduce_rows(plan, x, y, Wide{0}, add, to_t);
      case Reduction::kProd:
        return reduce_rows(plan, x, y, Wide{1}, [](Wide a, T v, std::int64_t) { return a * static_cast<Wide>(v); },
                           to_t);
      case Reduction::kMax:
        return reduce_rows(plan, x, y, kLowest, [](T a, T v, std::int64_t) { return pick<true>(a, v); }, to_t);
      case Reduction::kMin:
        return reduce_rows(plan, x, y, kHighest, [](T a, T v, std::int64_t) { return pick<false>(a, v); }, to_t);
      default:
        break;
    }
    if constexpr (std::is_floating_point_v<T>) {
      const double count = static_cast<double>(plan.count());
      auto square = [](double a, T v, std::int64_t) { return a + double(v) * double(v); };
      switch (reduction_) {
        case Reduction::kMean:
          return reduce_rows(plan, x, y, 0.0, add, [&](double a, std::int64_t) { return T(a / count); });
        case Reduction::kL1:
          return reduce_rows(plan, x, y, 0.0, [](double a, T v, std::int64_t) { return a + std::abs(double(v)); },
                             to_t);
        case Reduction::kL2:
          return reduce_rows(plan, x, y, 0.0, square, [](double a, std::int64_t) { return T(std::sqrt(a)); });
        case Reduction::kSumSquare:
          return reduce_rows(plan, x, y, 0.0, square, to_t);
        case Reduction::kLogSum:
          return reduce_rows(plan, x, y, 0.0, add, [](double a, std::int64_t) { return T(std::log(a)); });
        case Reduction::kLogSumExp: {
          // Each output's maximum (0 when not finite: all -inf, an inf or a NaN) is taken out of
          // the exponent and added back after the log.
          std::vector<T> shift(static_cast<std::size_t>(plan.rows() * plan.width()));
          reduce_rows(plan, x, shift.data(), kLowest, [](T a, T v, std::int64_t) { return pick<true>(a, v); },
                      [](T m, std::int64_t) { return std::isfinite(m) ? m : T(0); });
          return reduce_rows(
              plan, x, y, 0.0, [&](double a, T v, std::int64_t o) { return a + std::exp(double(v) - double(shift[o])); },
              [&](double a, std::int64_t o) { return T(double(shift[o]) + std::log(a)); });
        }
        default:
          break;
      }
    }
  }

  Reduction reduction_;
  bool axes_from_input_;
  bool keepdims_;
  bool noop_with_empty_axes_;
  std::vector<std::int64_t> axes_;
  // Recent input shapes and axes, with their output shape and plan (a kernel runs one batch at
  // a time), oldest first.
  struct Layout {
    Shape shape, axes, out;
    ReducePlan plan;
  };
  static constexpr std::size_t kLayouts = 8;
  std::vector<Layout> layouts_;
};

KernelFactory reduce_factory(Reduction reduction) {
  return [reduction](const Node& node, const KernelInfo& info) -> std::unique_ptr<Kernel> {
    return std::make_unique<ReduceKernel>(node, info, reduction);
  };
}

}  // namespace

RW_REGISTER_KERNEL("ReduceSum", Device::kCpu, reduce_factory(Reduction::kSum));
RW_REGISTER_KERNEL("ReduceMean", Device::kCpu, reduce_factory(Reduction::kMean));
RW_REGISTER_KERNEL("ReduceMax", Device::kCpu, reduce_factory(Reduction::kMax));
RW_REGISTER_KERNEL("ReduceMin", Device::kCpu, reduce_factory(Reduction::kMin));
RW_REGISTER_KERNEL("ReduceProd", Device::kCpu, reduce_factory(Reduction::kProd));
RW_REGISTER_KERNEL("ReduceL1", Device::kCpu, reduce_factory(Reduction::kL1));
RW_REGISTER_KERNEL("ReduceL2", Device::kCpu, reduce_factory(Reduction::kL2));
RW_REGISTER_KERNEL("ReduceLogSum", Device::kCpu, reduce_factory(Reduction::kLogSum));
RW_REGISTER_KERNEL("ReduceLogSumExp", Device::kCpu, reduce_factory(Reduction::kLogSumExp));
RW_REGISTER_KERNEL("ReduceSumSquare", Device::kCpu, reduce_factory(Reduction::kSumSquare));

}  // namespace redwood::cpu
