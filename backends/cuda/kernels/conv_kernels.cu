// Convolution kernels: implicit GEMM on CUDA cores (exact fp32) and on tensor cores through WMMA
// (tf32, fp16, bf16 operands; fp32 accumulation), depthwise and transposed convolution, each with
// the fused epilogue y = act(conv + bias + residual).
//
// Implicit GEMM view of one group g:   Y[m][n] = Σ_k A[m][k] · B[k][n]
//   m = (image, oy, ox)            A[m][k] = x[image, g·Cg + c, oy·sh − ph + r·dh, ox·sw − pw + s·dw]
//   k = (c, r, s), Kdim = Cg·R·S   B[k][n] = w[g·Kg + n][k]   (OIHW weights are rows of Kdim)
//   n = output channel within g
// A is never materialized: each block gathers its tile of A straight from x into shared memory.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/conv_kernels.hpp"
#include "backends/cuda/kernels/device_math.cuh"

#include <algorithm>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

namespace redwood::cuda::kernels {
namespace {

using namespace nvcuda;

struct ConvGeometry {
  int m_total, kg, cg, kdim, rs, ohw;
};

__device__ __forceinline__ ConvGeometry geometry(const ConvShape& p) {
  ConvGeometry g;
  g.ohw = p.oh * p.ow;
  g.m_total = p.n * g.ohw;
  g.kg = p.k / p.groups;
  g.cg = p.c / p.groups;
  g.rs = p.r * p.s;
  g.kdim = g.cg * g.rs;
  return g;
}

// Element A[m][kidx] of group `grp`, zero outside the image (padding) or past the edges.
__device__ __forceinline__ float load_a(const ConvShape& p, const ConvGeometry& g, const float* x, int grp,
                                        bool m_ok, int image, int oy, int ox, int kidx, int k_end) {
  if (!m_ok || kidx >= k_end) return 0.f;
  const int ci = kidx / g.rs;
  const int rem = kidx - ci * g.rs;
  const int ry = rem / p.s;
  const int sx = rem - ry * p.s;
  const int iy = oy * p.stride_h - p.pad_h + ry * p.dil_h;
  const int ix = ox * p.stride_w - p.pad_w + sx * p.dil_w;
  if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) return 0.f;
  const long long plane = static_cast<long long>(image) * p.c + grp * g.cg + ci;
  return __ldg(x + (plane * p.h + iy) * p.w + ix);
}

__device__ __forceinline__ void store_y(const ConvShape& p, const ConvGeometry& g, float* y, const Epilogue& e,
                                        int m, int oc, float acc) {
  const int image = m / g.ohw;
  const int pix = m - image * g.ohw;
  const long long idx = (static_cast<long long>(image) * p.k + oc) * g.ohw + pix;
  float v = acc;
  if (e.bias != nullptr) v += __ldg(e.bias + oc);
  if (e.residual != nullptr) v += __ldg(e.residual + idx);
  y[idx] = activate(v, e.act, e.alpha, e.beta);
}

// Split-K: grid layer z = split · groups + group; split s sums K over [k_begin, k_end) and, when
// there are several splits, writes its partial tile to `partial` ([split][group][m][n]) for
// splitk_reduce, which adds the splits in a fixed order (deterministic) and runs the epilogue.
struct KRange {
  int grp, split, k_begin, k_end;
};

__device__ __forceinline__ KRange k_range(const ConvShape& p, const ConvGeometry& g, int bk) {
  KRange r;
  r.grp = blockIdx.z % p.groups;
  r.split = blockIdx.z / p.groups;
  const int splits = gridDim.z / p.groups;
  const int tiles = (g.kdim + bk - 1) / bk;
  const int per = (tiles + splits - 1) / splits;
  r.k_begin = min(r.split * per * bk, g.kdim);
  r.k_end = min(r.k_begin + per * bk, g.kdim);
  return r;
}

__device__ __forceinline__ void finish(const ConvShape& p, const ConvGeometry& g, float* y, float* partial,
                                       const Epilogue& e, const KRange& r, int m, int n, float acc) {
  if (partial != nullptr) {
    partial[((static_cast<long long>(r.split) * p.groups + r.grp) * g.m_total + m) * g.kg + n] = acc;
  } else {
    store_y(p, g, y, e, m, r.grp * g.kg + n, acc);
  }
}

__global__ void splitk_reduce(ConvShape p, const float* __restrict__ partial, float* __restrict__ y, Epilogue e,
                              int splits, long long total) {
  const ConvGeometry g = geometry(p);
  RW_GRID_STRIDE(i, total) {
    const int n = static_cast<int>(i % g.kg);
    const int m = static_cast<int>((i / g.kg) % g.m_total);
    const int grp = static_cast<int>(i / (static_cast<long long>(g.kg) * g.m_total));
    float acc = 0.f;
    for (int s = 0; s < splits; ++s) acc += partial[i + s * total];
    store_y(p, g, y, e, m, grp * g.kg + n, acc);
  }
}

// ---- exact fp32 on CUDA cores: 64×64 tile, 256 threads, 4×4 outputs each ----
constexpr int kSimtBM = 64, kSimtBN = 64, kSimtBK = 16;

__global__ void __launch_bounds__(256) conv_simt(ConvShape p, const float* __restrict__ x,
                                                 const float* __restrict__ w, float* __restrict__ y, Epilogue e,
                                                 float* __restrict__ partial) {
  __shared__ float as[kSimtBK][kSimtBM];
  __shared__ float bs[kSimtBK][kSimtBN + 1];
  const ConvGeometry g = geometry(p);
  const KRange kr = k_range(p, g, kSimtBK);
  const int grp = kr.grp;
  const int m0 = blockIdx.x * kSimtBM, n0 = blockIdx.y * kSimtBN;
  const int t = threadIdx.x;
  // This thread always loads A rows m0 + t % 64: decode that pixel once.
  const int am = m0 + (t % kSimtBM);
  const bool am_ok = am < g.m_total;
  const int image = am_ok ? am / g.ohw : 0;
  const int pix = am_ok ? am - image * g.ohw : 0;
  const int oy = pix / p.ow, ox = pix - (pix / p.ow) * p.ow;
  const float* wg = w + static_cast<long long>(grp) * g.kg * g.kdim;
  const int tx = t % 16, ty = t / 16;
  float acc[4][4] = {};
  for (int k0 = kr.k_begin; k0 < kr.k_end; k0 += kSimtBK) {
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const int kk = t / kSimtBM + 4 * l;
      as[kk][t % kSimtBM] = load_a(p, g, x, grp, am_ok, image, oy, ox, k0 + kk, kr.k_end);
      const int idx = t + 256 * l;
      const int bk = idx % kSimtBK, bn = idx / kSimtBK;
      const bool ok = n0 + bn < g.kg && k0 + bk < kr.k_end;
      bs[bk][bn] = ok ? __ldg(wg + static_cast<long long>(n0 + bn) * g.kdim + k0 + bk) : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kSimtBK; ++kk) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = as[kk][tx + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = bs[kk][ty + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int m = m0 + tx + 16 * i;
    if (m >= g.m_total) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int n = n0 + ty + 16 * j;
      if (n < g.kg) finish(p, g, y, partial, e, kr, m, n, acc[i][j]);
    }
  }
}

// ---- tensor cores through WMMA: 64×64 tile, 4 warps of 32×32, BK = 32 ----
struct Tf32Tag {};
template <typename T> struct Mma;
template <> struct Mma<half> {
  using Smem = half;
  using Frag = half;
  static constexpr int kK = 16, kPad = 8;
  static __device__ __forceinline__ Smem cvt(float v) { return __float2half_rn(v); }
};
template <> struct Mma<__nv_bfloat16> {
  using Smem = __nv_bfloat16;
  using Frag = __nv_bfloat16;
  static constexpr int kK = 16, kPad = 8;
  static __device__ __forceinline__ Smem cvt(float v) { return __float2bfloat16_rn(v); }
};
template <> struct Mma<Tf32Tag> {
  using Smem = float;
  using Frag = wmma::precision::tf32;
  static constexpr int kK = 8, kPad = 4;
  static __device__ __forceinline__ Smem cvt(float v) { return wmma::__float_to_tf32(v); }
};

constexpr int kTcBM = 64, kTcBN = 64, kTcBK = 32, kTcLdc = kTcBN + 4;

template <typename T>
__global__ void __launch_bounds__(128) conv_wmma(ConvShape p, const float* __restrict__ x,
                                                 const float* __restrict__ w, float* __restrict__ y, Epilogue e,
                                                 float* __restrict__ partial) {
  using M = Mma<T>;
  using S = typename M::Smem;
  constexpr int kLd = kTcBK + M::kPad;
  __shared__ __align__(128) S as[kTcBM * kLd];  // A[m][k], row-major
  __shared__ __align__(128) S bs[kTcBN * kLd];  // B[k][n] stored as [n][k]: column-major B
  __shared__ __align__(128) float cs[kTcBM * kTcLdc];
  const ConvGeometry g = geometry(p);
  const KRange kr = k_range(p, g, kTcBK);
  const int grp = kr.grp;
  const int m0 = blockIdx.x * kTcBM, n0 = blockIdx.y * kTcBN;
  const int t = threadIdx.x, warp = t / 32;
  const int wm = warp / 2, wn = warp % 2;
  const int am = m0 + (t % kTcBM);
  const bool am_ok = am < g.m_total;
  const int image = am_ok ? am / g.ohw : 0;
  const int pix = am_ok ? am - image * g.ohw : 0;
  const int oy = pix / p.ow, ox = pix - (pix / p.ow) * p.ow;
  const float* wg = w + static_cast<long long>(grp) * g.kg * g.kdim;

  wmma::fragment<wmma::accumulator, 16, 16, M::kK, float> acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.f);

  for (int k0 = kr.k_begin; k0 < kr.k_end; k0 += kTcBK) {
#pragma unroll 4
    for (int l = 0; l < 16; ++l) {
      const int kk = t / kTcBM + 2 * l;
      as[(t % kTcBM) * kLd + kk] = M::cvt(load_a(p, g, x, grp, am_ok, image, oy, ox, k0 + kk, kr.k_end));
      const int bk = t % kTcBK, bn = t / kTcBK + 4 * l;
      const bool ok = n0 + bn < g.kg && k0 + bk < kr.k_end;
      bs[bn * kLd + bk] = M::cvt(ok ? __ldg(wg + static_cast<long long>(n0 + bn) * g.kdim + k0 + bk) : 0.f);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTcBK; kk += M::kK) {
      wmma::fragment<wmma::matrix_a, 16, 16, M::kK, typename M::Frag, wmma::row_major> fa[2];
      wmma::fragment<wmma::matrix_b, 16, 16, M::kK, typename M::Frag, wmma::col_major> fb[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], as + (wm * 32 + i * 16) * kLd + kk, kLd);
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], bs + (wn * 32 + j * 16) * kLd + kk, kLd);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(cs + (wm * 32 + i * 16) * kTcLdc + wn * 32 + j * 16, acc[i][j], kTcLdc,
                              wmma::mem_row_major);
  __syncthreads();
  for (int idx = t; idx < kTcBM * kTcBN; idx += 128) {
    const int mm = idx % kTcBM, nn = idx / kTcBM;
    const int m = m0 + mm, n = n0 + nn;
    if (m < g.m_total && n < g.kg) finish(p, g, y, partial, e, kr, m, n, cs[mm * kTcLdc + nn]);
  }
}

__global__ void conv_depthwise(ConvShape p, const float* __restrict__ x, const float* __restrict__ w,
                               float* __restrict__ y, Epilogue e, long long total) {
  const int kg = p.k / p.groups;
  RW_GRID_STRIDE(i, total) {
    const int ox = static_cast<int>(i % p.ow);
    const int oy = static_cast<int>((i / p.ow) % p.oh);
    const int oc = static_cast<int>((i / (static_cast<long long>(p.ow) * p.oh)) % p.k);
    const long long image = i / (static_cast<long long>(p.ow) * p.oh * p.k);
    const int ci = oc / kg;
    const float* xp = x + (image * p.c + ci) * p.h * p.w;
    const float* wp = w + static_cast<long long>(oc) * p.r * p.s;
    float acc = 0.f;
    for (int ry = 0; ry < p.r; ++ry) {
      const int iy = oy * p.stride_h - p.pad_h + ry * p.dil_h;
      if (iy < 0 || iy >= p.h) continue;
      for (int sx = 0; sx < p.s; ++sx) {
        const int ix = ox * p.stride_w - p.pad_w + sx * p.dil_w;
        if (ix >= 0 && ix < p.w) acc = fmaf(__ldg(xp + iy * p.w + ix), __ldg(wp + ry * p.s + sx), acc);
      }
    }
    if (e.bias != nullptr) acc += __ldg(e.bias + oc);
    if (e.residual != nullptr) acc += __ldg(e.residual + i);
    y[i] = activate(acc, e.act, e.alpha, e.beta);
  }
}

// y[n, oc, oy, ox] = Σ over ic of oc's group, (r, s) with oy = iy·sh − ph + r·dh: x[n, ic, iy, ix] · w[ic, oc_g, r, s]
__global__ void conv_transpose(ConvShape p, const float* __restrict__ x, const float* __restrict__ w,
                               float* __restrict__ y, Epilogue e, long long total) {
  const int kg = p.k / p.groups, cg = p.c / p.groups;
  RW_GRID_STRIDE(i, total) {
    const int ox = static_cast<int>(i % p.ow);
    const int oy = static_cast<int>((i / p.ow) % p.oh);
    const int oc = static_cast<int>((i / (static_cast<long long>(p.ow) * p.oh)) % p.k);
    const long long image = i / (static_cast<long long>(p.ow) * p.oh * p.k);
    const int grp = oc / kg, ocg = oc - grp * kg;
    float acc = 0.f;
    for (int ry = 0; ry < p.r; ++ry) {
      const int ty = oy + p.pad_h - ry * p.dil_h;
      if (ty < 0 || ty % p.stride_h != 0) continue;
      const int iy = ty / p.stride_h;
      if (iy >= p.h) continue;
      for (int sx = 0; sx < p.s; ++sx) {
        const int tx = ox + p.pad_w - sx * p.dil_w;
        if (tx < 0 || tx % p.stride_w != 0) continue;
        const int ix = tx / p.stride_w;
        if (ix >= p.w) continue;
        for (int c = 0; c < cg; ++c) {
          const int ic = grp * cg + c;
          acc = fmaf(__ldg(x + ((image * p.c + ic) * p.h + iy) * p.w + ix),
                     __ldg(w + ((static_cast<long long>(ic) * kg + ocg) * p.r + ry) * p.s + sx), acc);
        }
      }
    }
    if (e.bias != nullptr) acc += __ldg(e.bias + oc);
    if (e.residual != nullptr) acc += __ldg(e.residual + i);
    y[i] = activate(acc, e.act, e.alpha, e.beta);
  }
}

}  // namespace

void launch_conv_implicit_gemm(const ConvShape& p, const float* x, const float* w, float* y, const Epilogue& e,
                               MmaType type, int splits, float* partial, cudaStream_t stream) {
  const long long m_total = static_cast<long long>(p.n) * p.oh * p.ow;
  const int kg = p.k / p.groups;
  if (m_total == 0 || kg == 0) return;
  if (splits < 1 || partial == nullptr) splits = 1;
  float* part = splits > 1 ? partial : nullptr;
  const unsigned layers = static_cast<unsigned>(p.groups * splits);
  if (type == MmaType::kFp32) {
    const dim3 grid(static_cast<unsigned>((m_total + kSimtBM - 1) / kSimtBM), (kg + kSimtBN - 1) / kSimtBN, layers);
    conv_simt<<<grid, 256, 0, stream>>>(p, x, w, y, e, part);
    RW_CUDA_CHECK_LAUNCH("conv_simt");
  } else {
    const dim3 grid(static_cast<unsigned>((m_total + kTcBM - 1) / kTcBM), (kg + kTcBN - 1) / kTcBN, layers);
    switch (type) {
      case MmaType::kTf32: conv_wmma<Tf32Tag><<<grid, 128, 0, stream>>>(p, x, w, y, e, part); break;
      case MmaType::kFp16: conv_wmma<half><<<grid, 128, 0, stream>>>(p, x, w, y, e, part); break;
      default: conv_wmma<__nv_bfloat16><<<grid, 128, 0, stream>>>(p, x, w, y, e, part); break;
    }
    RW_CUDA_CHECK_LAUNCH("conv_wmma");
  }
  if (splits > 1) {
    const long long total = m_total * p.k;
    splitk_reduce<<<grid_for(total), 256, 0, stream>>>(p, partial, y, e, splits, total);
    RW_CUDA_CHECK_LAUNCH("conv_splitk_reduce");
  }
}

int conv_split_k(const ConvShape& p, MmaType type, int multiprocessors) {
  const long long m_total = static_cast<long long>(p.n) * p.oh * p.ow;
  const int kg = p.k / p.groups;
  const int bm = type == MmaType::kFp32 ? kSimtBM : kTcBM, bk = type == MmaType::kFp32 ? kSimtBK : kTcBK;
  const long long blocks = ((m_total + bm - 1) / bm) * ((kg + 63) / 64) * p.groups;
  const int tiles = ((p.c / p.groups) * p.r * p.s + bk - 1) / bk;
  // Aim for two blocks per multiprocessor, keeping at least 4 K tiles per split, 16 splits at most.
  long long splits = (2LL * multiprocessors + blocks - 1) / blocks;
  splits = std::min<long long>({splits, tiles / 4, 16});
  return static_cast<int>(std::max<long long>(splits, 1));
}

void launch_conv_depthwise(const ConvShape& p, const float* x, const float* w, float* y, const Epilogue& e,
                           cudaStream_t stream) {
  const long long total = static_cast<long long>(p.n) * p.k * p.oh * p.ow;
  if (total == 0) return;
  conv_depthwise<<<grid_for(total), 256, 0, stream>>>(p, x, w, y, e, total);
  RW_CUDA_CHECK_LAUNCH("conv_depthwise");
}

void launch_conv_transpose(const ConvShape& p, const float* x, const float* w, float* y, const Epilogue& e,
                           cudaStream_t stream) {
  const long long total = static_cast<long long>(p.n) * p.k * p.oh * p.ow;
  if (total == 0) return;
  conv_transpose<<<grid_for(total), 256, 0, stream>>>(p, x, w, y, e, total);
  RW_CUDA_CHECK_LAUNCH("conv_transpose");
}

}  // namespace redwood::cuda::kernels
