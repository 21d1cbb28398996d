// NonZero (opset 9, 13): the coordinates of the input's nonzero elements, as an int64 tensor
// [rank, count] whose column j is the j-th nonzero element's position in row-major order (numpy's
// nonzero, stacked). A scalar reads as a 1-element vector ([1, count]), as numpy and ONNX Runtime
// treat it. Any held type; for floats -0 is zero and NaN is not.
//
// Two passes over fixed chunks of the input, both parallel: count each chunk's nonzeros, then
// write each chunk's coordinates from its prefix of the counts.

#include "backends/cpu/reference/kernel_util.hpp"

#include <numeric>

namespace redwood::cpu {
namespace {

constexpr std::int64_t kChunk = std::int64_t{1} << 16;

template <typename T>
bool nonzero(T v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return (v.bits & 0x7fffu) != 0;  // ±0 have no bits below the sign
  } else {
    return v != T{};
  }
}

class NonZeroKernel final : public Kernel {
 public:
  NonZeroKernel(const Node&, const KernelInfo&) {}

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor x = ctx.input(0).contiguous();
    const Shape shape = x.rank() == 0 ? Shape{1} : x.shape();
    const auto rank = static_cast<std::int64_t>(shape.size());
    const std::int64_t n = x.numel();
    const std::int64_t chunks = (n + kChunk - 1) / kChunk;
    dispatch<float, Half, BFloat16, std::int64_t, std::int32_t, std::uint8_t, bool>(
        x.dtype(), node, [&](auto zero) {
          using T = decltype(zero);
          const T* v = x.data<T>();
          // starts[c]: the nonzeros before chunk c; starts[chunks]: all of them.
          std::vector<std::int64_t> starts(static_cast<std::size_t>(chunks) + 1, 0);
          parallel_for(chunks, 1, [&](std::int64_t begin, std::int64_t end) {
            for (std::int64_t c = begin; c < end; ++c) {
              std::int64_t count = 0;
              for (std::int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) count += nonzero(v[i]);
              starts[static_cast<std::size_t>(c) + 1] = count;
            }
          });
          std::partial_sum(starts.begin(), starts.end(), starts.begin());
          const std::int64_t total = starts.back();
          Tensor y = ctx.allocate_output(0, DType::kI64, {rank, total});
          std::int64_t* out = y.data<std::int64_t>();
          parallel_for(chunks, 1, [&](std::int64_t begin, std::int64_t end) {
            for (std::int64_t c = begin; c < end; ++c) {
              std::int64_t j = starts[static_cast<std::size_t>(c)];
              for (std::int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) {
                if (!nonzero(v[i])) continue;
                for (std::int64_t d = rank, rem = i; d-- > 0; rem /= shape[d]) {
                  out[d * total + j] = rem % shape[d];
                }
                ++j;
              }
            }
          });
          ctx.outputs[0] = std::move(y);
        });
  }
};

}  // namespace

RW_REGISTER_KERNEL("NonZero", Device::kCpu, make_factory<NonZeroKernel>());

}  // namespace redwood::cpu
