// The NHWC depthwise convolution (nhwc.hpp): S activations [N, H, W, C] (fp16, bf16 or fp32),
// fp32 weights [R, S, C], fp32 math, one rounding on store.
//
// Tiled kernel (3×3, 5×5, 7×7, equal strides 1 or 2, dilation 1): thread i takes channel vector
// g = i % (C/8) (16-byte loads along C, so a warp's loads are contiguous runs of the pixel's
// channels) and kOut consecutive outputs along W of one output row. Per filter row it walks the
// (kOut−1)·stride + S input columns its outputs need once, each column one 16-byte load feeding
// every output whose window covers it: 18 loads for 4 outputs of a 3×3 stride-1 filter instead of
// 36, 27 instead of 36 at stride 2. A row's loads are all issued before any is used (clamped
// addresses, padding zeroed by a select), so each thread has a whole row in flight. The filter row's weights are read as float4s (they stay in
// L1: all threads of a channel vector share them). Consecutive threads cover the same output row,
// consecutive blocks the next rows, so the rows two outputs share are still in L2.
//
// Direct kernel (anything else: other windows, unequal strides, dilation, or 2^31 threads of the
// tiled one): one output pixel per thread, every tap one 16-byte load.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/device_math.cuh"
#include "backends/cuda/kernels/nhwc_vec.cuh"
#include "backends/cuda/kernels/pdl.cuh"

namespace redwood::cuda::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kOut = 4;  // outputs along W per thread (tiled kernel)

__device__ __forceinline__ void load_bias(const float* bias, int c0, float (&b)[kNhwcVec]) {
  if (bias != nullptr) {
    load8_f32(bias + c0, b);
  } else {
#pragma unroll
    for (int j = 0; j < kNhwcVec; ++j) b[j] = 0.f;
  }
}

// y = act(acc + bias + residual), rounded to S once.
template <typename T>
__device__ __forceinline__ void store_output(T* y, const T* residual, long long at, float (&acc)[kNhwcVec],
                                             const float (&b)[kNhwcVec], const Epilogue& e, bool round) {
  float r[kNhwcVec];
  if (residual != nullptr) {
    load8(residual + at, r);
  } else {
#pragma unroll
    for (int j = 0; j < kNhwcVec; ++j) r[j] = 0.f;
  }
#pragma unroll
  for (int j = 0; j < kNhwcVec; ++j) acc[j] = activate(acc[j] + b[j] + r[j], e.act, e.alpha, e.beta);
  if constexpr (std::is_same_v<T, float>) round_tf32_if(round, acc);
  store8(y + at, acc);
}

// At most 128 registers (two blocks a multiprocessor) up to 5×5: unbounded, the compiler hoists
// every row's loads and takes up to 195, one block. (7×7 would spill at 128.) fp32 storage holds
// twice the registers a loaded column (32 bytes): two blocks up to 3×3 only.
template <typename T, int R, int S, int STRIDE>
__global__ void __launch_bounds__(kThreads, R <= (sizeof(T) == 2 ? 5 : 3) ? 2 : 1)
    depthwise_nhwc_tiled(NhwcDepthwiseParams p, const T* __restrict__ x, const float* __restrict__ w,
                         const float* __restrict__ bias, const T* __restrict__ residual, T* __restrict__ y, Epilogue e,
                         int xtiles, int total) {
  constexpr int kCols = (kOut - 1) * STRIDE + S;  // input columns of a thread's outputs
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);  // total < 2^31 (launcher)
  if (i >= total) return;
  const int groups = p.c / kNhwcVec;
  const int c0 = i % groups * kNhwcVec;
  int rest = i / groups;
  const int ox0 = rest % xtiles * kOut;
  rest /= xtiles;
  const int oy = rest % p.oh;
  const int n = rest / p.oh;
  float b[kNhwcVec];
  load_bias(bias, c0, b);  // no kernel writes bias or weights: before the wait
  float acc[kOut][kNhwcVec];
#pragma unroll
  for (int o = 0; o < kOut; ++o) {
#pragma unroll
    for (int j = 0; j < kNhwcVec; ++j) acc[o][j] = 0.f;
  }
  const int iy0 = oy * STRIDE - p.pad_h, ix0 = ox0 * STRIDE - p.pad_w;
  const T* xn = x + static_cast<long long>(n) * p.h * p.w * p.c + c0;
  pdl_wait();
#pragma unroll
  for (int ky = 0; ky < R; ++ky) {
    // Every load is issued, from a clamped (valid) address, and padding zeroed by a select: with a
    // branch around each load the thread waited for one load before issuing the next (that
    // version, with 64-bit index math and no register bound, took 1.3-2x as long on MobileNetV3's
    // layers at batch 32 on the H200).
    const int iy = iy0 + ky;
    const bool row_in = iy >= 0 && iy < p.h;
    const T* row = xn + static_cast<long long>(min(max(iy, 0), p.h - 1)) * p.w * p.c;
    Raw8<T> raw[kCols];
#pragma unroll
    for (int col = 0; col < kCols; ++col) {
      const int ix = ix0 + col;
      raw[col] = keep_or_zero(load_raw8(row + static_cast<long long>(min(max(ix, 0), p.w - 1)) * p.c),
                              row_in && ix >= 0 && ix < p.w);
    }
    float wr[S][kNhwcVec];
#pragma unroll
    for (int s = 0; s < S; ++s) load8_f32(w + (ky * S + s) * p.c + c0, wr[s]);
#pragma unroll
    for (int col = 0; col < kCols; ++col) {
      float v[kNhwcVec];
      widen8(raw[col], v);
#pragma unroll
      for (int o = 0; o < kOut; ++o) {
        const int s = col - o * STRIDE;  // compile-time after unrolling
        if (s < 0 || s >= S) continue;
#pragma unroll
        for (int j = 0; j < kNhwcVec; ++j) acc[o][j] = fmaf(v[j], wr[s][j], acc[o][j]);
      }
    }
  }
  const long long out_row = (static_cast<long long>(n) * p.oh + oy) * p.ow;
#pragma unroll
  for (int o = 0; o < kOut; ++o) {
    if (ox0 + o >= p.ow) break;
    store_output(y, residual, (out_row + ox0 + o) * p.c + c0, acc[o], b, e, p.round_tf32);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    depthwise_nhwc_direct(NhwcDepthwiseParams p, const T* __restrict__ x, const float* __restrict__ w,
                          const float* __restrict__ bias, const T* __restrict__ residual, T* __restrict__ y, Epilogue e,
                          long long total) {
  const int groups = p.c / kNhwcVec;
  pdl_wait();
  RW_GRID_STRIDE(i, total) {
    const int c0 = static_cast<int>(i % groups) * kNhwcVec;
    long long rest = i / groups;
    const int ox = static_cast<int>(rest % p.ow);
    rest /= p.ow;
    const int oy = static_cast<int>(rest % p.oh);
    const long long n = rest / p.oh;
    const T* xn = x + n * p.h * p.w * p.c + c0;
    float acc[kNhwcVec], b[kNhwcVec];
    load_bias(bias, c0, b);
#pragma unroll
    for (int j = 0; j < kNhwcVec; ++j) acc[j] = 0.f;
    for (int ky = 0; ky < p.r; ++ky) {
      const int iy = oy * p.stride_h - p.pad_h + ky * p.dil_h;
      if (iy < 0 || iy >= p.h) continue;
      for (int kx = 0; kx < p.s; ++kx) {
        const int ix = ox * p.stride_w - p.pad_w + kx * p.dil_w;
        if (ix < 0 || ix >= p.w) continue;
        float v[kNhwcVec], wv[kNhwcVec];
        load8(xn + (static_cast<long long>(iy) * p.w + ix) * p.c, v);
        load8_f32(w + (ky * p.s + kx) * p.c + c0, wv);
#pragma unroll
        for (int j = 0; j < kNhwcVec; ++j) acc[j] = fmaf(v[j], wv[j], acc[j]);
      }
    }
    store_output(y, residual, i * kNhwcVec, acc, b, e, p.round_tf32);
  }
}

// Threads of the tiled kernel: one per 4 outputs along W of one channel vector.
long long tiled_threads(const NhwcDepthwiseParams& p) {
  return static_cast<long long>(p.n) * p.oh * ((p.ow + kOut - 1) / kOut) * (p.c / kNhwcVec);
}

bool tiled(const NhwcDepthwiseParams& p) {
  return p.r == p.s && (p.r == 3 || p.r == 5 || p.r == 7) && p.stride_h == p.stride_w &&
         (p.stride_h == 1 || p.stride_h == 2) && p.dil_h == 1 && p.dil_w == 1 && tiled_threads(p) < (1LL << 31);
}

template <typename T, int R>
void launch_tiled(const NhwcDepthwiseParams& p, const T* x, const float* w, const float* bias, const T* residual, T* y,
                  const Epilogue& e, cudaStream_t stream) {
  const int xtiles = (p.ow + kOut - 1) / kOut;
  const int total = static_cast<int>(tiled_threads(p));
  const auto blocks = static_cast<unsigned>((total + kThreads - 1) / kThreads);
  auto kernel = p.stride_h == 1 ? depthwise_nhwc_tiled<T, R, R, 1> : depthwise_nhwc_tiled<T, R, R, 2>;
  (void)launch_kernel(kernel, blocks, kThreads, 0, stream, p, x, w, bias, residual, y, e, xtiles, total);
}

}  // namespace

const char* depthwise_nhwc_variant(const NhwcDepthwiseParams& p) {
  if (!tiled(p)) return "direct";
  static const char* names[3][2] = {{"tiled 3x3/1", "tiled 3x3/2"}, {"tiled 5x5/1", "tiled 5x5/2"},
                                    {"tiled 7x7/1", "tiled 7x7/2"}};
  return names[(p.r - 3) / 2][p.stride_h - 1];
}

void launch_depthwise_nhwc(NhwcStorage s, const NhwcDepthwiseParams& p, const void* x, const float* w,
                           const float* bias, const void* residual, void* y, const Epilogue& e, cudaStream_t stream) {
  const long long pixels = static_cast<long long>(p.n) * p.oh * p.ow;
  if (pixels == 0 || p.c == 0) return;
  with_storage(s, [&](auto tag) {
    using T = decltype(tag);
    const T* xt = static_cast<const T*>(x);
    const T* rt = static_cast<const T*>(residual);
    T* yt = static_cast<T*>(y);
    if (!tiled(p)) {
      const long long total = pixels * (p.c / kNhwcVec);
      (void)launch_kernel(depthwise_nhwc_direct<T>, grid_for(total, kThreads), kThreads, 0, stream, p, xt, w, bias, rt,
                          yt, e, total);
    } else if (p.r == 3) {
      launch_tiled<T, 3>(p, xt, w, bias, rt, yt, e, stream);
    } else if (p.r == 5) {
      launch_tiled<T, 5>(p, xt, w, bias, rt, yt, e, stream);
    } else {
      launch_tiled<T, 7>(p, xt, w, bias, rt, yt, e, stream);
    }
  });
  RW_CUDA_CHECK_LAUNCH("depthwise_nhwc");
}

}  // namespace redwood::cuda::kernels
