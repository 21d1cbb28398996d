// The NHWC companion kernels other than the depthwise convolution (conv_depthwise_nhwc.cu):
// layout conversions at a region's boundaries, max pooling, the squeeze-excite pair (global mean,
// channel scale). One thread per 8-channel vector of an output pixel, the vector index fastest,
// so that a warp's 16-byte accesses along C are contiguous; fp32 math, one rounding on store. The
// conversions take V = 8 or (fp32 storage with C % 8 != 0) V = 4 channels a thread.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/device_math.cuh"
#include "backends/cuda/kernels/nhwc/nhwc_vec.cuh"
#include "backends/cuda/kernels/pdl.cuh"

#include <algorithm>

namespace redwood::cuda::kernels {
namespace {

constexpr int kThreads = 256;

// fp32 NCHW → S NHWC. Thread i: channel vector g = i % groups (V channels) of PIX consecutive
// pixels (of one image: PIX divides H·W). PIX = 4 reads each channel's 4 pixels as one float4, so
// an image of 3 channels (the network's input) moves 48 bytes in and 64 out per thread, all coalesced.
template <typename T, int PIX, int V>
__global__ void __launch_bounds__(kThreads)
    to_nhwc_kernel(const float* __restrict__ x, T* __restrict__ y, int c, long long hw, int groups, long long total,
                   bool round) {
  pdl_wait();
  RW_GRID_STRIDE(i, total) {
    const int g = static_cast<int>(i % groups);
    const long long pix = i / groups * PIX;  // n·hw + p
    const long long n = pix / hw, p = pix - n * hw;
    const float* xp = x + (n * c + g * V) * hw + p;
    float f[PIX][V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const bool in = g * V + j < c;
      if constexpr (PIX == 4) {
        const float4 v = in ? __ldg(reinterpret_cast<const float4*>(xp + j * hw)) : make_float4(0.f, 0.f, 0.f, 0.f);
        f[0][j] = v.x, f[1][j] = v.y, f[2][j] = v.z, f[3][j] = v.w;
      } else {
        f[0][j] = in ? __ldg(xp + j * hw) : 0.f;
      }
    }
#pragma unroll
    for (int q = 0; q < PIX; ++q) {
      round_tf32_if(round, f[q]);
      store_vec<V>(y + ((pix + q) * groups + g) * V, f[q]);
    }
  }
}

// fp32 NCHW → S NHWC with cp == V (an image of up to 8 channels, or 4 at fp32: the network's
// input). Lanes run
// along pixels: warp w of the grid takes pixels [w·32·Q, +32·Q), lane l pixels l, l + 32, ...,
// so each channel's read is 128 contiguous bytes a warp and each 16-byte store 512 contiguous
// bytes (the four-pixel kernel above writes 16 bytes at a 64-byte stride: 2.3 TB/s against
// 3.4 TB/s here on 32×3×224×224, redwood_nhwc_bench on the H200).
template <typename T, int Q, int V>
__global__ void __launch_bounds__(kThreads)
    to_nhwc_lanes_kernel(const float* __restrict__ x, T* __restrict__ y, int c, long long hw, long long pixels,
                         bool round) {
  const long long first =
      (static_cast<long long>(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32) * (32 * Q) + threadIdx.x % 32;
  pdl_wait();
  float f[Q][V];
#pragma unroll
  for (int q = 0; q < Q; ++q) {
    const long long pix = first + 32 * q;
#pragma unroll
    for (int j = 0; j < V; ++j) f[q][j] = 0.f;
    if (pix < pixels) {
      const long long n = pix / hw;
      const float* xp = x + n * c * hw + (pix - n * hw);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        if (j < c) f[q][j] = __ldg(xp + j * hw);
      }
    }
  }
#pragma unroll
  for (int q = 0; q < Q; ++q) {
    round_tf32_if(round, f[q]);
    if (first + 32 * q < pixels) store_vec<V>(y + (first + 32 * q) * V, f[q]);
  }
}

// S NHWC → fp32 NCHW, the mirror of to_nhwc_kernel.
template <typename T, int PIX, int V>
__global__ void __launch_bounds__(kThreads)
    to_nchw_kernel(const T* __restrict__ x, float* __restrict__ y, int c, long long hw, int groups, long long total) {
  pdl_wait();
  RW_GRID_STRIDE(i, total) {
    const int g = static_cast<int>(i % groups);
    const long long pix = i / groups * PIX;
    const long long n = pix / hw, p = pix - n * hw;
    float f[PIX][V];
#pragma unroll
    for (int q = 0; q < PIX; ++q) load_vec<V>(x + ((pix + q) * groups + g) * V, f[q]);
    float* yp = y + (n * c + g * V) * hw + p;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      if (g * V + j >= c) break;
      if constexpr (PIX == 4) {
        *reinterpret_cast<float4*>(yp + j * hw) = make_float4(f[0][j], f[1][j], f[2][j], f[3][j]);
      } else {
        yp[j * hw] = f[0][j];
      }
    }
  }
}

// Thread i: channel vector i % groups of output pixel i / groups. Only window positions inside
// the input are compared (padding never wins).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    max_pool_nhwc_kernel(NhwcPoolParams p, const T* __restrict__ x, T* __restrict__ y, long long total) {
  const int groups = p.c / kNhwcVec;
  pdl_wait();
  RW_GRID_STRIDE(i, total) {
    const int g = static_cast<int>(i % groups);
    long long r = i / groups;
    const int ox = static_cast<int>(r % p.ow);
    r /= p.ow;
    const int oy = static_cast<int>(r % p.oh);
    const long long n = r / p.oh;
    const T* xn = x + n * p.h * p.w * p.c + g * kNhwcVec;
    float m[kNhwcVec];
#pragma unroll
    for (int j = 0; j < kNhwcVec; ++j) m[j] = -INFINITY;
    for (int ky = 0; ky < p.kh; ++ky) {
      const int iy = oy * p.sh - p.ph + ky * p.dh;
      if (iy < 0 || iy >= p.h) continue;
      for (int kx = 0; kx < p.kw; ++kx) {
        const int ix = ox * p.sw - p.pw + kx * p.dw;
        if (ix < 0 || ix >= p.w) continue;
        float v[kNhwcVec];
        load8(xn + (static_cast<long long>(iy) * p.w + ix) * p.c, v);
#pragma unroll
        for (int j = 0; j < kNhwcVec; ++j) m[j] = fmaxf(m[j], v[j]);
      }
    }
    if constexpr (std::is_same_v<T, float>) round_tf32_if(p.round_tf32, m);  // 16-bit storage: ignored
    store8(y + i * kNhwcVec, m);
  }
}

// Block (blockIdx.x, part, n): `vecs` channel vectors (8·vecs channels) × `slices` slices of the
// pixels of one part of the image (NhwcGapPlan). Thread (tx, ty) sums vector tx over the part's
// pixels ty, ty + slices, ... (a warp reads contiguous channel vectors of a pixel); the partial
// sums per channel meet in shared memory and are added in slice order, each thread then writing
// one channel, coalesced: the mean when the image is one part, else the part's sum into
// `partial` [n][parts][c], which gap_finish_kernel adds in part order. Fixed orders throughout:
// deterministic. The plan {32, 8, 1} is the kernel before parts (a block per 256 channels).
constexpr int kGapSmemRow = kThreads * kNhwcVec;  // floats: slices · (8·vecs + 1) ≤ this + slices
template <typename T>
__global__ void __launch_bounds__(kThreads)
    global_avg_pool_nhwc_kernel(const T* __restrict__ x, float* __restrict__ y, float* __restrict__ partial,
                                long long hw, int c, int vecs, int slices, int parts, long long part_pixels) {
  __shared__ float part[kGapSmemRow + kThreads];
  const int tx = static_cast<int>(threadIdx.x) % vecs, ty = static_cast<int>(threadIdx.x) / vecs;
  const int groups = c / kNhwcVec;
  const int g = static_cast<int>(blockIdx.x) * vecs + tx;
  const int pi = static_cast<int>(blockIdx.y);
  const long long n = blockIdx.z;
  const int row = vecs * kNhwcVec + 1;  // floats a slice, +1 against bank conflicts
  const long long p0 = pi * part_pixels, p1 = min(hw, p0 + part_pixels);
  float acc[kNhwcVec];
#pragma unroll
  for (int j = 0; j < kNhwcVec; ++j) acc[j] = 0.f;
  pdl_wait();
  if (g < groups && ty < slices) {
    const T* xp = x + n * hw * c + g * kNhwcVec;
    // kBatch pixels' loads issued together (128 bytes a thread in flight), from clamped addresses;
    // the sums still take the pixels one by one, in order.
    constexpr int kBatch = sizeof(T) == 2 ? 8 : 4;
    for (long long p = p0 + ty; p < p1; p += static_cast<long long>(kBatch) * slices) {
      Raw8<T> raw[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) raw[u] = load_raw8(xp + min(p + u * slices, p1 - 1) * c);
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        if (p + u * slices < p1) {
          float v[kNhwcVec];
          widen8(raw[u], v);
#pragma unroll
          for (int j = 0; j < kNhwcVec; ++j) acc[j] += v[j];
        }
      }
    }
  }
  if (ty < slices) {
#pragma unroll
    for (int j = 0; j < kNhwcVec; ++j) part[ty * row + tx * kNhwcVec + j] = acc[j];
  }
  __syncthreads();
  const int t = static_cast<int>(threadIdx.x);
  const int ch = static_cast<int>(blockIdx.x) * vecs * kNhwcVec + t;
  if (t >= vecs * kNhwcVec || ch >= c) return;
  float sum = 0.f;
  for (int sl = 0; sl < slices; ++sl) sum += part[sl * row + t];
  if (parts == 1) {
    y[n * c + ch] = sum / static_cast<float>(hw);
  } else {
    partial[(n * parts + pi) * c + ch] = sum;
  }
}

// Thread i: channel i % c of image i / c, its parts' sums added in part order.
__global__ void __launch_bounds__(kThreads)
    gap_finish_kernel(const float* __restrict__ partial, float* __restrict__ y, long long hw, int c, int parts,
                      long long total) {
  pdl_wait();
  RW_GRID_STRIDE(i, total) {
    const long long n = i / c, ch = i % c;
    const float* pp = partial + n * parts * c + ch;
    float sum = 0.f;
    for (int k = 0; k < parts; ++k) sum += pp[static_cast<long long>(k) * c];
    y[i] = sum / static_cast<float>(hw);
  }
}

// Thread i: vector i of x (channel vector i % groups of image i / (hw·groups)).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    scale_channels_nhwc_kernel(const T* __restrict__ x, const float* __restrict__ scale, T* __restrict__ y,
                               long long hw, int c, long long total, bool round) {
  const int groups = c / kNhwcVec;
  pdl_wait();
  RW_GRID_STRIDE(i, total) {
    const long long g = i % groups, n = i / (hw * groups);
    float v[kNhwcVec], s[kNhwcVec];
    load8(x + i * kNhwcVec, v);
    load8_f32(scale + n * c + g * kNhwcVec, s);
#pragma unroll
    for (int j = 0; j < kNhwcVec; ++j) v[j] *= s[j];
    round_tf32_if(round, v);
    store8(y + i * kNhwcVec, v);
  }
}

}  // namespace

// Calls f(T{}, integral_constant<V>) for the storage type and the conversions' channels per thread:
// 8, or 4 for fp32 tensors whose cp is not a multiple of 8 (16-bit ones always are).
template <typename F>
void with_conversion(NhwcStorage s, long long cp, F&& f) {
  if (s == NhwcStorage::kF32 && cp % kNhwcVec != 0) {
    f(float{}, std::integral_constant<int, 4>{});
  } else {
    with_storage(s, [&](auto tag) { f(tag, std::integral_constant<int, kNhwcVec>{}); });
  }
}

void launch_to_nhwc(NhwcStorage s, const float* x, void* y, int n, int c, int h, int w, int cp, cudaStream_t stream,
                    bool round_tf32) {
  const long long hw = static_cast<long long>(h) * w;
  if (n == 0 || hw == 0) return;
  const bool round = round_tf32 && s == NhwcStorage::kF32;
  with_conversion(s, cp, [&](auto tag, auto vec) {
    using T = decltype(tag);
    constexpr int V = decltype(vec)::value;
    const long long groups = cp / V;
    if (groups == 1) {
      constexpr int kQ = 4;
      const long long pixels = n * hw;
      const auto blocks = static_cast<unsigned>((pixels + kThreads * kQ - 1) / (kThreads * kQ));
      (void)launch_kernel(to_nhwc_lanes_kernel<T, kQ, V>, blocks, kThreads, 0, stream, x, static_cast<T*>(y), c, hw,
                          pixels, round);
      return;
    }
    // Four pixels a thread where the float4 reads stay aligned (x itself is 16-byte aligned).
    const bool quad = hw % 4 == 0;
    const long long total = n * hw * groups / (quad ? 4 : 1);
    (void)launch_kernel(quad ? to_nhwc_kernel<T, 4, V> : to_nhwc_kernel<T, 1, V>, grid_for(total, kThreads), kThreads,
                        0, stream, x, static_cast<T*>(y), c, hw, static_cast<int>(groups), total, round);
  });
  RW_CUDA_CHECK_LAUNCH("to_nhwc");
}

void launch_to_nchw(NhwcStorage s, const void* x, float* y, int n, int c, int h, int w, int cp, cudaStream_t stream) {
  const long long hw = static_cast<long long>(h) * w;
  if (n == 0 || hw == 0) return;
  with_conversion(s, cp, [&](auto tag, auto vec) {
    using T = decltype(tag);
    constexpr int V = decltype(vec)::value;
    const long long groups = cp / V;
    const bool quad = hw % 4 == 0;
    const long long total = n * hw * groups / (quad ? 4 : 1);
    (void)launch_kernel(quad ? to_nchw_kernel<T, 4, V> : to_nchw_kernel<T, 1, V>, grid_for(total, kThreads), kThreads,
                        0, stream, static_cast<const T*>(x), y, c, hw, static_cast<int>(groups), total);
  });
  RW_CUDA_CHECK_LAUNCH("to_nchw");
}

void launch_max_pool_nhwc(NhwcStorage s, const NhwcPoolParams& p, const void* x, void* y, cudaStream_t stream) {
  const long long total = static_cast<long long>(p.n) * p.oh * p.ow * (p.c / kNhwcVec);
  if (total == 0) return;
  with_storage(s, [&](auto tag) {
    using T = decltype(tag);
    (void)launch_kernel(max_pool_nhwc_kernel<T>, grid_for(total, kThreads), kThreads, 0, stream, p,
                        static_cast<const T*>(x), static_cast<T*>(y), total);
  });
  RW_CUDA_CHECK_LAUNCH("max_pool_nhwc");
}

NhwcGapPlan global_avg_pool_nhwc_plan(int n, long long hw, int c, int multiprocessors) {
  NhwcGapPlan plan;
  const int groups = c / kNhwcVec;
  if (groups <= 0 || n <= 0 || hw <= 0) return plan;
  // Only the vectors there are (a fixed 32 would leave 23 of 32 idle at 72 channels), the rest of the
  // block's 256 threads on more slices (at most 64: the slices' sums are added one by one).
  plan.vecs = std::min(groups, 32);
  plan.slices = std::min(kThreads / plan.vecs, 64);
  // Images cut into parts when a thread would add more than 8 pixels: about two blocks a
  // multiprocessor, at least 2 pixels a thread. (MobileNetV3-L at batch 32: 28×28×72 took one
  // block an image, 28 pixels a thread, 0.017 ms.)
  const long long per_thread = (hw + plan.slices - 1) / plan.slices;
  if (per_thread > 8) {
    const long long base = static_cast<long long>(n) * ((groups + plan.vecs - 1) / plan.vecs);
    const long long want = (2LL * std::max(multiprocessors, 1) + base - 1) / base;
    plan.parts = static_cast<int>(std::max(1LL, std::min({want, (per_thread + 1) / 2, 65535LL})));
  }
  return plan;
}

std::size_t global_avg_pool_nhwc_workspace(const NhwcGapPlan& plan, int n, int c) {
  return plan.parts > 1 ? static_cast<std::size_t>(n) * plan.parts * c * sizeof(float) : 0;
}

void launch_global_avg_pool_nhwc(NhwcStorage s, const void* x, float* y, int n, long long hw, int c,
                                 cudaStream_t stream, const NhwcGapPlan& plan, float* workspace) {
  if (n == 0 || c == 0) return;
  const int groups = c / kNhwcVec;
  const int parts = workspace != nullptr ? plan.parts : 1;  // no workspace: one part
  const long long part_pixels = (hw + parts - 1) / parts;
  const dim3 grid(static_cast<unsigned>((groups + plan.vecs - 1) / plan.vecs), static_cast<unsigned>(parts),
                  static_cast<unsigned>(n));
  with_storage(s, [&](auto tag) {
    using T = decltype(tag);
    (void)launch_kernel(global_avg_pool_nhwc_kernel<T>, grid, kThreads, 0, stream, static_cast<const T*>(x), y,
                        workspace, hw, c, plan.vecs, plan.slices, parts, part_pixels);
  });
  RW_CUDA_CHECK_LAUNCH("global_avg_pool_nhwc");
  if (parts > 1) {
    const long long total = static_cast<long long>(n) * c;
    (void)launch_kernel(gap_finish_kernel, grid_for(total, kThreads), kThreads, 0, stream,
                        static_cast<const float*>(workspace), y, hw, c, parts, total);
    RW_CUDA_CHECK_LAUNCH("global_avg_pool_nhwc (parts)");
  }
}

void launch_scale_channels_nhwc(NhwcStorage s, const void* x, const float* scale, void* y, int n, long long hw, int c,
                                cudaStream_t stream, bool round_tf32) {
  const long long total = n * hw * (c / kNhwcVec);
  if (total == 0) return;
  with_storage(s, [&](auto tag) {
    using T = decltype(tag);
    (void)launch_kernel(scale_channels_nhwc_kernel<T>, grid_for(total, kThreads), kThreads, 0, stream,
                        static_cast<const T*>(x), scale, static_cast<T*>(y), hw, c, total,
                        round_tf32 && s == NhwcStorage::kF32);
  });
  RW_CUDA_CHECK_LAUNCH("scale_channels_nhwc");
}

}  // namespace redwood::cuda::kernels
