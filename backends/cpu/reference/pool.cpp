// MaxPool, AveragePool (ONNX opsets 1-22) over 1, 2 or 3 spatial axes; GlobalAveragePool and
// GlobalMaxPool over any number.
//
// MaxPool: kernel_shape, strides, pads, dilations, ceil_mode, auto_pad; float and uint8. The
// optional Indices output is rejected at load (and with it storage_order, which only orders
// the indices). Padding never wins a max: only taps inside the input count.
// AveragePool: the same window attributes and count_include_pad. The divisor counts the taps
// inside the input, or with count_include_pad the taps inside the padded input (a ceil_mode
// window hanging past the end padding does not count the part beyond it, as in PyTorch and
// ONNX Runtime).

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/nn_common.hpp"

#include <algorithm>
#include <limits>
#include <vector>

namespace redwood::cpu {
namespace {

using nn::Axes3;

enum class PoolMode { kMax, kAverage };

// The output of one window position along one axis: taps [k_lo, k_hi) fall inside the input;
// `padded` taps fall inside input + pads.
struct TapRange {
  std::int64_t k_lo, k_hi, padded;
};

// Tap ranges of every output position along one axis (the same for all planes).
std::vector<TapRange> tap_ranges(const nn::Axis& a) {
  std::vector<TapRange> out(static_cast<std::size_t>(a.out));
  for (std::int64_t o = 0; o < a.out; ++o) {
    const std::int64_t start = o * a.stride - a.pad_begin;
    // Taps k with start + k * dilation in [0, in), and in [-pad_begin, in + pad_end).
    const auto [lo, hi] = nn::valid_range(a.kernel, a.in, a.dilation, start);
    const auto [plo, phi] =
        nn::valid_range(a.kernel, a.in + a.pad_begin + a.pad_end, a.dilation, start + a.pad_begin);
    out[o] = {lo, hi, phi - plo};
  }
  return out;
}

template <typename T>
void pool_plane(PoolMode mode, bool count_include_pad, const T* src, const Axes3& a,
                const std::vector<TapRange> (&ranges)[3], T* dst) {
  for (std::int64_t od = 0; od < a[0].out; ++od) {
    const TapRange rd = ranges[0][od];
    const std::int64_t d0 = od * a[0].stride - a[0].pad_begin;
    for (std::int64_t oh = 0; oh < a[1].out; ++oh) {
      const TapRange rh = ranges[1][oh];
      const std::int64_t h0 = oh * a[1].stride - a[1].pad_begin;
      for (std::int64_t ow = 0; ow < a[2].out; ++ow) {
        const TapRange rw = ranges[2][ow];
        const std::int64_t w0 = ow * a[2].stride - a[2].pad_begin;
        T best = std::numeric_limits<T>::lowest();
        float sum = 0.0f;
        for (std::int64_t kd = rd.k_lo; kd < rd.k_hi; ++kd) {
          const std::int64_t id = d0 + kd * a[0].dilation;
          for (std::int64_t kh = rh.k_lo; kh < rh.k_hi; ++kh) {
            const T* row = src + (id * a[1].in + h0 + kh * a[1].dilation) * a[2].in;
            for (std::int64_t kw = rw.k_lo; kw < rw.k_hi; ++kw) {
              const T v = row[w0 + kw * a[2].dilation];
              if (mode == PoolMode::kMax) {
                best = v > best ? v : best;
              } else {
                sum += static_cast<float>(v);
              }
            }
          }
        }
        T& out = dst[(od * a[1].out + oh) * a[2].out + ow];
        if (mode == PoolMode::kMax) {
          out = best;
        } else {
          const std::int64_t count =
              count_include_pad ? rd.padded * rh.padded * rw.padded
                                : (rd.k_hi - rd.k_lo) * (rh.k_hi - rh.k_lo) * (rw.k_hi - rw.k_lo);
          out = static_cast<T>(count > 0 ? sum / static_cast<float>(count) : 0.0f);
        }
      }
    }
  }
}

class PoolKernel final : public Kernel {
 public:
  PoolKernel(const Node& node, const KernelInfo& info, PoolMode mode)
      : mode_(mode), window_(nn::parse_window(node, /*read_ceil_mode=*/true)) {
    if (mode_ == PoolMode::kMax) {
      expect_dtype(node, info.input_dtypes.empty() ? DType::kUndefined : info.input_dtypes[0],
                   {DType::kF32, DType::kU8}, "X");
      RW_EXPECTS(node.outputs.size() < 2 || node.outputs[1].empty(), Unsupported,
                 "{}: the Indices output is not supported", node.where());
    } else {
      expect_dtype(node, info.input_dtypes.empty() ? DType::kUndefined : info.input_dtypes[0],
                   {DType::kF32}, "X");
      count_include_pad_ = node.attr_int("count_include_pad", 0) != 0;
    }
    RW_EXPECTS(!window_.kernel_shape.empty(), InvalidArgument,
               "{}: the kernel_shape attribute is required", node.where());
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor x = ctx.input(0).contiguous();
    RW_EXPECTS(x.rank() >= 3, InvalidArgument, "{}: X {} must be [N, C, spatial...]",
               node.where(), shape_str(x.shape()));
    const std::size_t spatial = static_cast<std::size_t>(x.rank() - 2);
    nn::check_window_rank(node, window_, spatial, x.shape());
    const std::vector<std::int64_t> in(x.shape().begin() + 2, x.shape().end());
    const Axes3 a = nn::resolve_forward(node, window_, in, window_.kernel_shape, x.shape());
    Shape out_shape{x.dim(0), x.dim(1)};
    for (std::size_t i = 0; i < spatial; ++i) out_shape.push_back(a[nn::kMaxSpatial - spatial + i].out);

    const std::vector<TapRange> ranges[3] = {tap_ranges(a[0]), tap_ranges(a[1]), tap_ranges(a[2])};
    const std::int64_t planes = x.dim(0) * x.dim(1);
    const std::int64_t in_plane = a[0].in * a[1].in * a[2].in;
    const std::int64_t out_plane = a[0].out * a[1].out * a[2].out;
    auto compute = [&](auto tag) {
      using T = decltype(tag);
      Tensor y = ctx.allocate_output(0, dtype_of<T>, out_shape);
      ctx.outputs[0] = y;
      const T* xp = x.data<T>();
      T* yp = y.data<T>();
      parallel_for(planes, std::max<std::int64_t>(1, 4096 / std::max<std::int64_t>(1, out_plane)),
                   [&](std::int64_t begin, std::int64_t end) {
                     for (std::int64_t p = begin; p < end; ++p) {
                       pool_plane<T>(mode_, count_include_pad_, xp + p * in_plane, a, ranges,
                                     yp + p * out_plane);
                     }
                   });
    };
    if (mode_ == PoolMode::kMax) {
      dispatch<float, std::uint8_t>(x.dtype(), node, compute);
    } else {
      dispatch<float>(x.dtype(), node, compute);
    }
  }

 private:
  PoolMode mode_;
  nn::WindowAttrs window_;
  bool count_include_pad_ = false;
};

// GlobalAveragePool / GlobalMaxPool: the mean / the largest value of each [N, C] plane, as
// [N, C, 1, ...]; NaN for an empty plane.
class GlobalPoolKernel final : public Kernel {
 public:
  GlobalPoolKernel(const Node& node, const KernelInfo& info, PoolMode mode) : mode_(mode) {
    expect_dtype(node, info.input_dtypes.empty() ? DType::kUndefined : info.input_dtypes[0],
                 {DType::kF32}, "X");
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor x = ctx.input(0).contiguous();
    nn::expect_f32(node, x, "X");
    RW_EXPECTS(x.rank() >= 2, InvalidArgument, "{}: X {} must be [N, C, spatial...]", node.where(),
               shape_str(x.shape()));
    Shape out_shape{x.dim(0), x.dim(1)};
    out_shape.resize(static_cast<std::size_t>(x.rank()), 1);
    Tensor y = ctx.allocate_output(0, DType::kF32, out_shape);
    ctx.outputs[0] = y;
    const std::int64_t planes = x.dim(0) * x.dim(1);
    const std::int64_t plane = planes == 0 ? 0 : x.numel() / planes;
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    parallel_for(planes, std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(1, plane)),
                 [&](std::int64_t begin, std::int64_t end) {
                   for (std::int64_t p = begin; p < end; ++p) {
                     const float* src = xp + p * plane;
                     if (plane == 0) {
                       yp[p] = std::numeric_limits<float>::quiet_NaN();
                     } else if (mode_ == PoolMode::kMax) {
                       yp[p] = *std::max_element(src, src + plane);
                     } else {
                       // double: a 640 x 640 plane summed in float would lose digits.
                       double sum = 0.0;
                       for (std::int64_t i = 0; i < plane; ++i) sum += src[i];
                       yp[p] = static_cast<float>(sum / double(plane));
                     }
                   }
                 });
  }

 private:
  PoolMode mode_;
};

template <typename K>
KernelFactory pool_factory(PoolMode mode) {
  return [mode](const Node& node, const KernelInfo& info) -> std::unique_ptr<Kernel> {
    return std::make_unique<K>(node, info, mode);
  };
}

}  // namespace

RW_REGISTER_KERNEL("MaxPool", Device::kCpu, pool_factory<PoolKernel>(PoolMode::kMax));
RW_REGISTER_KERNEL("AveragePool", Device::kCpu, pool_factory<PoolKernel>(PoolMode::kAverage));
RW_REGISTER_KERNEL("GlobalAveragePool", Device::kCpu, pool_factory<GlobalPoolKernel>(PoolMode::kAverage));
RW_REGISTER_KERNEL("GlobalMaxPool", Device::kCpu, pool_factory<GlobalPoolKernel>(PoolMode::kMax));

}  // namespace redwood::cpu
