// Tensors made from a few numbers: Range, Size and EyeLike.
//
// Range (opset 11): start, limit and delta are scalars of one type (float, int64 or int32 here;
// double and int16 are rejected at load). The output is 1-D with max(ceil((limit - start) / delta),
// 0) elements, element i = start + i * delta (computed in double for float, exactly for integers).
// A delta of 0 is an error.
//
// Size (opset 1, 13): the input's element count as an int64 scalar.
//
// EyeLike (opset 9): a 2-D tensor of the input's shape with ones on the k-th diagonal (k > 0 above
// the main one, k < 0 below) and zeros elsewhere; its type is the `dtype` attribute's, else the
// input's. Any held type: the one is written as the type's bytes.

#include "backends/cpu/reference/cast.hpp"
#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/op_inputs.hpp"
#include "backends/cpu/reference/shape_copy.hpp"

#include <cmath>
#include <cstring>

namespace redwood::cpu {
namespace {

class RangeKernel final : public Kernel {
 public:
  RangeKernel(const Node& node, const KernelInfo& info) {
    for (std::size_t i = 0; i < 3; ++i) {
      expect_dtype(node, detail::input_dtype(info, i), {DType::kF32, DType::kI64, DType::kI32},
                   kNames[i]);
    }
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor& start = ctx.input(0);
    for (std::size_t i = 0; i < 3; ++i) {
      const Tensor& t = ctx.input(i);
      RW_EXPECTS(t.dtype() == start.dtype(), InvalidArgument,
                 "{}: start, limit and delta must have one type, got {} and {}", node.where(),
                 start.description(), t.description());
      detail::expect_one_value(node, t, kNames[i]);
    }
    dispatch<float, std::int64_t, std::int32_t>(start.dtype(), node, [&](auto zero) {
      using T = decltype(zero);
      const T first = ctx.input(0).data<T>()[0], limit = ctx.input(1).data<T>()[0],
              delta = ctx.input(2).data<T>()[0];
      RW_EXPECTS(delta != 0, InvalidArgument, "{}: delta is 0", node.where());
      const std::int64_t n = count(node, first, limit, delta);
      Tensor y = ctx.allocate_output(0, start.dtype(), {n});
      T* out = y.data<T>();
      parallel_for(n, std::int64_t{1} << 16, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) {
          if constexpr (std::is_floating_point_v<T>) {
            out[i] = static_cast<T>(static_cast<double>(first) + static_cast<double>(i) * delta);
          } else {
            // Within [first, limit), but i * delta alone may pass int64's range.
            out[i] = static_cast<T>(static_cast<__int128>(first) + static_cast<__int128>(i) * delta);
          }
        }
      });
      ctx.outputs[0] = std::move(y);
    });
  }

 private:
  // max(ceil((limit - first) / delta), 0), checked to be a tensor's length.
  template <typename T>
  static std::int64_t count(const Node& node, T first, T limit, T delta) {
    if constexpr (std::is_floating_point_v<T>) {
      const double n = std::ceil((static_cast<double>(limit) - first) / delta);
      RW_EXPECTS(!std::isnan(n) && n < static_cast<double>(kMaxElements), InvalidArgument,
                 "{}: a range from {} to {} by {} is not a tensor's length", node.where(), first,
                 limit, delta);
      return n > 0 ? static_cast<std::int64_t>(n) : 0;
    } else {
      const __int128 diff = static_cast<__int128>(limit) - first;
      const __int128 n = delta > 0 ? (diff > 0 ? (diff + delta - 1) / delta : 0)
                                   : (diff < 0 ? (diff + delta + 1) / delta : 0);
      RW_EXPECTS(n <= kMaxElements, InvalidArgument,
                 "{}: a range from {} to {} by {} is longer than a tensor can be", node.where(),
                 first, limit, delta);
      return static_cast<std::int64_t>(n);
    }
  }

  static constexpr const char* kNames[] = {"start", "limit", "delta"};
};

class SizeKernel final : public Kernel {
 public:
  SizeKernel(const Node&, const KernelInfo&) {}

  void run(KernelContext& ctx) override {
    Tensor y = ctx.allocate_output(0, DType::kI64, {});
    *y.data<std::int64_t>() = ctx.input(0).numel();
    ctx.outputs[0] = std::move(y);
  }
};

class EyeLikeKernel final : public Kernel {
 public:
  EyeLikeKernel(const Node& node, const KernelInfo& info) : k_(node.attr_int("k", 0)) {
    if (node.has_attr("dtype")) attr_dtype_ = dtype_attribute(node, "dtype");
    const DType dtype = attr_dtype_ != DType::kUndefined ? attr_dtype_ : detail::input_dtype(info, 0);
    if (dtype != DType::kUndefined) one_ = one_of(dtype);
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor& x = ctx.input(0);
    RW_EXPECTS(x.rank() == 2, InvalidArgument, "{}: the input must be 2-D, got {}", node.where(),
               x.description());
    const DType dtype = attr_dtype_ != DType::kUndefined ? attr_dtype_ : x.dtype();
    const Tensor one = one_.dtype() == dtype ? one_ : one_of(dtype);
    const std::int64_t rows = x.shape()[0], cols = x.shape()[1];
    Tensor y = ctx.allocate_output(0, dtype, x.shape());
    std::memset(y.raw_data(), 0, y.nbytes());
    const std::size_t elem = dtype_size(dtype);
    std::byte* out = detail::bytes_of(y);
    // Row i holds its one at column i + k: rows max(0, -k) .. min(rows, cols - k).
    const std::int64_t k = std::clamp<std::int64_t>(k_, -rows, cols);
    for (std::int64_t i = std::max<std::int64_t>(0, -k); i < std::min(rows, cols - k); ++i) {
      std::memcpy(out + (i * cols + i + k) * static_cast<std::int64_t>(elem), one.raw_data(), elem);
    }
    ctx.outputs[0] = std::move(y);
  }

 private:
  static Tensor one_of(DType dtype) { return Tensor::scalar<float>(1.0f).cast(dtype); }

  std::int64_t k_;
  DType attr_dtype_ = DType::kUndefined;  // undefined: the input's type
  Tensor one_;                            // 1 in the output's type, when known at load
};

}  // namespace

RW_REGISTER_KERNEL("Range", Device::kCpu, make_factory<RangeKernel>());
RW_REGISTER_KERNEL("Size", Device::kCpu, make_factory<SizeKernel>());
RW_REGISTER_KERNEL("EyeLike", Device::kCpu, make_factory<EyeLikeKernel>());

}  // namespace redwood::cpu
