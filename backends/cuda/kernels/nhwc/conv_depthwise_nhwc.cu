// The NHWC depthwise convolution (nhwc.hpp): S activations [N, H, W, C] (fp16, bf16 or fp32),
// fp32 weights [R, S, C], fp32 math, one rounding on store.
//
// Tiled kernel (3×3, 5×5, 7×7, equal strides 1 or 2, dilation 1): thread i takes a vector of V
// channels g = i % (C/V) (16-byte loads along C, so a warp's loads are contiguous runs of the
// pixel's channels) and OX consecutive outputs along W of OY consecutive output rows (the variant,
// NhwcDepthwiseVariant: V 8, or 4 at fp32 storage; OX 4 or 2; OY 1 or 2; picked per shape by the
// tuner in nhwc.cpp, the default 8 × 4 × 1). Per input row it walks the (OX−1)·stride + S input
// columns its outputs need once, each column one 16-byte load (two for 8 channels of fp32) feeding
// every output whose window covers it: 18 loads for 4 outputs of a 3×3 stride-1 filter instead of
// 36, 27 instead of 36 at stride 2, 24 for 2 rows of 4. A row's loads are all issued before any
// is used (clamped addresses, padding zeroed by a select), so each thread has a whole row in
// flight. The filter row's weights are read as float4s (they stay in L1: all threads of a channel
// vector share them). Consecutive threads cover the same output row, consecutive blocks the next
// rows, so the rows two outputs share are still in L2. Every variant adds an output's taps in the
// same order, so all give the same bits.
//
// Direct kernel (anything else: other windows, unequal strides, dilation, or 2^31 threads of the
// tiled one): one output pixel per thread, every tap one 16-byte load.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/device_math.cuh"
#include "backends/cuda/kernels/nhwc/nhwc_vec.cuh"
#include "backends/cuda/kernels/pdl.cuh"

#include <string>
#include <type_traits>
#include <vector>

namespace redwood::cuda::kernels {
namespace {

constexpr int kThreads = 256;

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

// V channels of an activation as raw 16-byte vectors (V = 8: one of a 16-bit type, two of fp32;
// V = 4: one of fp32), loaded raw and widened later so that a row's loads issue back to back.
template <typename T, int V>
struct RawV {
  static_assert(sizeof(T) * V % 16 == 0, "a thread's channels are whole 16-byte vectors");
  static constexpr int kU = static_cast<int>(sizeof(T)) * V / 16;
  uint4 u[kU];
};

template <typename T, int V>
__device__ __forceinline__ RawV<T, V> load_raw(const T* p, bool keep) {
  RawV<T, V> r;
#pragma unroll
  for (int i = 0; i < RawV<T, V>::kU; ++i) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(p) + i);
    r.u[i] = keep ? v : make_uint4(0u, 0u, 0u, 0u);  // a select, not a branch
  }
  return r;
}

template <typename T, int V>
__device__ __forceinline__ void widen(const RawV<T, V>& r, float (&f)[V]) {
  if constexpr (std::is_same_v<T, float>) {
    const float* v = reinterpret_cast<const float*>(&r.u[0]);
#pragma unroll
    for (int i = 0; i < V; ++i) f[i] = v[i];
  } else {
    Raw8<T> r8;
    r8.u[0] = r.u[0];
    widen8(r8, f);
  }
}

// Registers of a variant, roughly: its loaded columns, accumulators and one filter row per output
// row, plus indices. Bounds the kernel so that 1-4 blocks of 256 threads fit a multiprocessor
// (the H200's 64K registers): the small variants exist to put more loads in flight.
template <typename T, int V, int OX, int OY, int R, int STRIDE>
constexpr int min_blocks() {
  if constexpr (V == 8 && OX == 4 && OY == 1) {
    // The original variant's bound: up to 5×5 in 128 registers at 16-bit storage (unbounded, the
    // compiler hoists every row's loads and takes up to 195, one block; 7×7 would spill at 128),
    // up to 3×3 at fp32 (twice the registers a loaded column).
    return R <= (sizeof(T) == 2 ? 5 : 3) ? 2 : 1;
  } else {
    constexpr int cols = (OX - 1) * STRIDE + R;
    constexpr int regs = cols * static_cast<int>(sizeof(T)) * V / 4 + OY * OX * V + OY * R * V + 24;
    return regs <= 64 ? 4 : regs <= 84 ? 3 : regs <= 128 ? 2 : 1;
  }
}

// Thread i: channel vector i % (C/V) of OX consecutive outputs along W in each of OY consecutive
// output rows. Per input row it loads the (OX−1)·STRIDE + S columns its outputs need once (each
// one 16-byte load or two) and feeds every output row and column whose window covers them, so an
// input value is loaded once for up to OX·OY outputs. Every output adds its taps in the order
// (filter row, filter column) whatever the variant: all variants give the same bits.
template <typename T, int V, int OX, int OY, int R, int S, int STRIDE>
__global__ void __launch_bounds__(kThreads, (min_blocks<T, V, OX, OY, R, STRIDE>()))
    depthwise_nhwc_tiled(NhwcDepthwiseParams p, const T* __restrict__ x, const float* __restrict__ w,
                         const float* __restrict__ bias, const T* __restrict__ residual, T* __restrict__ y, Epilogue e,
                         int xtiles, int ytiles, int total) {
  constexpr int kCols = (OX - 1) * STRIDE + S;  // input columns of a thread's outputs
  constexpr int kRows = (OY - 1) * STRIDE + R;  // input rows
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);  // total < 2^31 (launcher)
  if (i >= total) return;
  const int groups = p.c / V;
  const int c0 = i % groups * V;
  int rest = i / groups;
  const int ox0 = rest % xtiles * OX;
  rest /= xtiles;
  const int oy0 = rest % ytiles * OY;
  const int n = rest / ytiles;
  float b[V];
  if (bias != nullptr) {  // no kernel writes bias or weights: before the wait
    load_vec<V>(bias + c0, b);
  } else {
#pragma unroll
    for (int j = 0; j < V; ++j) b[j] = 0.f;
  }
  float acc[OY][OX][V];
#pragma unroll
  for (int oy = 0; oy < OY; ++oy) {
#pragma unroll
    for (int o = 0; o < OX; ++o) {
#pragma unroll
      for (int j = 0; j < V; ++j) acc[oy][o][j] = 0.f;
    }
  }
  const int iy0 = oy0 * STRIDE - p.pad_h, ix0 = ox0 * STRIDE - p.pad_w;
  const T* xn = x + static_cast<long long>(n) * p.h * p.w * p.c + c0;
  pdl_wait();
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    // Every load is issued, from a clamped (valid) address, and padding zeroed by a select: with a
    // branch around each load the thread waited for one load before issuing the next (that
    // version, with 64-bit index math and no register bound, took 1.3-2x as long on MobileNetV3's
    // layers at batch 32 on the H200).
    const int iy = iy0 + r;
    const bool row_in = iy >= 0 && iy < p.h;
    const T* row = xn + static_cast<long long>(min(max(iy, 0), p.h - 1)) * p.w * p.c;
    RawV<T, V> raw[kCols];
#pragma unroll
    for (int col = 0; col < kCols; ++col) {
      const int ix = ix0 + col;
      raw[col] = load_raw<T, V>(row + static_cast<long long>(min(max(ix, 0), p.w - 1)) * p.c,
                                row_in && ix >= 0 && ix < p.w);
    }
    // The filter rows this input row meets: ky = r − oy·STRIDE for each output row oy.
    float wr[OY][S][V];
#pragma unroll
    for (int oy = 0; oy < OY; ++oy) {
      const int ky = r - oy * STRIDE;  // compile-time after unrolling
      if (ky < 0 || ky >= R) continue;
#pragma unroll
      for (int s = 0; s < S; ++s) load_vec<V>(w + (ky * S + s) * p.c + c0, wr[oy][s]);
    }
#pragma unroll
    for (int col = 0; col < kCols; ++col) {
      float v[V];
      widen<T, V>(raw[col], v);
#pragma unroll
      for (int oy = 0; oy < OY; ++oy) {
        const int ky = r - oy * STRIDE;
        if (ky < 0 || ky >= R) continue;
#pragma unroll
        for (int o = 0; o < OX; ++o) {
          const int s = col - o * STRIDE;
          if (s < 0 || s >= S) continue;
#pragma unroll
          for (int j = 0; j < V; ++j) acc[oy][o][j] = fmaf(v[j], wr[oy][s][j], acc[oy][o][j]);
        }
      }
    }
  }
#pragma unroll
  for (int oy = 0; oy < OY; ++oy) {
    if (oy0 + oy >= p.oh) break;
    const long long out_row = (static_cast<long long>(n) * p.oh + oy0 + oy) * p.ow;
#pragma unroll
    for (int o = 0; o < OX; ++o) {
      if (ox0 + o >= p.ow) break;
      const long long at = (out_row + ox0 + o) * p.c + c0;
      float res[V];
      if (residual != nullptr) {
        load_vec<V>(residual + at, res);
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j) res[j] = 0.f;
      }
#pragma unroll
      for (int j = 0; j < V; ++j) acc[oy][o][j] = activate(acc[oy][o][j] + b[j] + res[j], e.act, e.alpha, e.beta);
      if constexpr (std::is_same_v<T, float>) round_tf32_if(p.round_tf32, acc[oy][o]);
      store_vec<V>(y + at, acc[oy][o]);
    }
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

// Threads of the tiled kernel: one per V channels of OX·OY outputs.
long long tiled_threads(const NhwcDepthwiseParams& p, const NhwcDepthwiseVariant& v) {
  return static_cast<long long>(p.n) * ((p.oh + v.oy - 1) / v.oy) * ((p.ow + v.ox - 1) / v.ox) * (p.c / v.vec);
}

bool tiled_window(const NhwcDepthwiseParams& p) {
  return p.r == p.s && (p.r == 3 || p.r == 5 || p.r == 7) && p.stride_h == p.stride_w &&
         (p.stride_h == 1 || p.stride_h == 2) && p.dil_h == 1 && p.dil_w == 1;
}

bool tiled(const NhwcDepthwiseParams& p) { return tiled_window(p) && tiled_threads(p, {}) < (1LL << 31); }

// The variants the tuner may pick (the first is the default):
// 8 channels × 4 outputs along W; fewer outputs a thread (more threads, more loads in flight, for
// the small late layers bound by latency); two output rows a thread (an input row loaded once for
// both, for the large early layers: 4 rows of loads for 2 output rows of a 3×3 filter, not 6); at
// fp32 4 channels a thread (one 16-byte load a column, half the registers: 2-4 blocks a
// multiprocessor instead of 1-2). 7×7 windows keep the default (no model here has them). On the
// H200 at batch 32 the tuner took 4×4×2 for MobileNetV3-L's 56×56, 112×112 and 5×5 stride-1
// layers at fp32 and 4×2×1 for most 14×14 ones; 8×2×2 and 8×2×1 for many at fp16.
constexpr NhwcDepthwiseVariant kVariants16[] = {{8, 4, 1}, {8, 2, 1}, {8, 2, 2}};
constexpr NhwcDepthwiseVariant kVariants32[] = {{8, 4, 1}, {4, 4, 1}, {4, 2, 1}, {4, 4, 2}, {4, 2, 2}};

bool same(const NhwcDepthwiseVariant& a, const NhwcDepthwiseVariant& b) {
  return a.vec == b.vec && a.ox == b.ox && a.oy == b.oy;
}

template <typename T, int V, int OX, int OY, int R>
void launch_tiled(const NhwcDepthwiseParams& p, const T* x, const float* w, const float* bias, const T* residual, T* y,
                  const Epilogue& e, cudaStream_t stream) {
  const int xtiles = (p.ow + OX - 1) / OX, ytiles = (p.oh + OY - 1) / OY;
  const int total = static_cast<int>(tiled_threads(p, {V, OX, OY}));
  const auto blocks = static_cast<unsigned>((total + kThreads - 1) / kThreads);
  auto kernel = p.stride_h == 1 ? depthwise_nhwc_tiled<T, V, OX, OY, R, R, 1> : depthwise_nhwc_tiled<T, V, OX, OY, R, R, 2>;
  (void)launch_kernel(kernel, blocks, kThreads, 0, stream, p, x, w, bias, residual, y, e, xtiles, ytiles, total);
}

// The variant v of window R (one of the tables above; anything else runs the default).
template <typename T, int R>
void launch_tiled_variant(const NhwcDepthwiseParams& p, const NhwcDepthwiseVariant& v, const T* x, const float* w,
                          const float* bias, const T* residual, T* y, const Epilogue& e, cudaStream_t stream) {
  if constexpr (R != 7) {
    if constexpr (std::is_same_v<T, float>) {
      if (same(v, {4, 4, 1})) return launch_tiled<T, 4, 4, 1, R>(p, x, w, bias, residual, y, e, stream);
      if (same(v, {4, 2, 1})) return launch_tiled<T, 4, 2, 1, R>(p, x, w, bias, residual, y, e, stream);
      if (same(v, {4, 4, 2})) return launch_tiled<T, 4, 4, 2, R>(p, x, w, bias, residual, y, e, stream);
      if (same(v, {4, 2, 2})) return launch_tiled<T, 4, 2, 2, R>(p, x, w, bias, residual, y, e, stream);
    } else {
      if (same(v, {8, 2, 1})) return launch_tiled<T, 8, 2, 1, R>(p, x, w, bias, residual, y, e, stream);
      if (same(v, {8, 2, 2})) return launch_tiled<T, 8, 2, 2, R>(p, x, w, bias, residual, y, e, stream);
    }
  }
  launch_tiled<T, 8, 4, 1, R>(p, x, w, bias, residual, y, e, stream);
}

}  // namespace

const char* depthwise_nhwc_variant(const NhwcDepthwiseParams& p) {
  if (!tiled(p)) return "direct";
  static const char* names[3][2] = {{"tiled 3x3/1", "tiled 3x3/2"}, {"tiled 5x5/1", "tiled 5x5/2"},
                                    {"tiled 7x7/1", "tiled 7x7/2"}};
  return names[(p.r - 3) / 2][p.stride_h - 1];
}

std::vector<NhwcDepthwiseVariant> depthwise_nhwc_candidates(NhwcStorage s, const NhwcDepthwiseParams& p) {
  std::vector<NhwcDepthwiseVariant> out = {NhwcDepthwiseVariant{}};
  if (!tiled(p) || p.r == 7) return out;
  const auto add = [&](const auto& table) {
    for (const NhwcDepthwiseVariant& v : table) {
      if (!same(v, out[0]) && tiled_threads(p, v) < (1LL << 31)) out.push_back(v);
    }
  };
  if (s == NhwcStorage::kF32) {
    add(kVariants32);
  } else {
    add(kVariants16);
  }
  return out;
}

std::string depthwise_nhwc_variant_name(const NhwcDepthwiseParams& p, const NhwcDepthwiseVariant& v) {
  std::string name = depthwise_nhwc_variant(p);
  if (!tiled(p)) return name;
  return name + " " + std::to_string(v.vec) + "ch " + std::to_string(v.ox) + "x" + std::to_string(v.oy);
}

void launch_depthwise_nhwc(NhwcStorage s, const NhwcDepthwiseParams& p, const void* x, const float* w,
                           const float* bias, const void* residual, void* y, const Epilogue& e, cudaStream_t stream,
                           const NhwcDepthwiseVariant& v) {
  const long long pixels = static_cast<long long>(p.n) * p.oh * p.ow;
  if (pixels == 0 || p.c == 0) return;
  // A variant the shape cannot take (4 channels of 16-bit storage, 2^31 threads) runs the default.
  const bool fits = tiled(p) && tiled_threads(p, v) < (1LL << 31) && (v.vec == 8 || s == NhwcStorage::kF32);
  const NhwcDepthwiseVariant run = fits ? v : NhwcDepthwiseVariant{};
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
      launch_tiled_variant<T, 3>(p, run, xt, w, bias, rt, yt, e, stream);
    } else if (p.r == 5) {
      launch_tiled_variant<T, 5>(p, run, xt, w, bias, rt, yt, e, stream);
    } else {
      launch_tiled_variant<T, 7>(p, run, xt, w, bias, rt, yt, e, stream);
    }
  });
  RW_CUDA_CHECK_LAUNCH("depthwise_nhwc");
}

}  // namespace redwood::cuda::kernels
