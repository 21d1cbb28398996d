#pragma once
// Device helpers shared by the implicit-GEMM convolution kernels (conv_kernels.cu: CUDA cores;
// conv_mma.cuh: tensor cores): the GEMM geometry, split-K ranges and the fused epilogue store.
//
// Implicit GEMM view of one group g:   Y[m][n] = Σ_k A[m][k] · B[k][n]
//   m = (image, oy, ox)            A[m][k] = x[image, g·Cg + c, oy·sh − ph + r·dh, ox·sw − pw + s·dw]
//   k = (c, r, s), Kdim = Cg·R·S   B[k][n] = w[g·Kg + n][k]   (OIHW weights are rows of Kdim)
//   n = output channel within g
// A is never materialized: each block gathers its tile of A straight from x into shared memory.

#include "backends/cuda/kernels/device_math.cuh"
#include "backends/cuda/kernels/kernel_params.hpp"

namespace redwood::cuda::kernels::conv {

struct Geometry {
  int m_total, kg, cg, kdim, rs, ohw;
};

__device__ __forceinline__ Geometry geometry(const ConvShape& p) {
  Geometry g;
  g.ohw = p.oh * p.ow;
  g.m_total = p.n * g.ohw;
  g.kg = p.k / p.groups;
  g.cg = p.c / p.groups;
  g.rs = p.r * p.s;
  g.kdim = g.cg * g.rs;
  return g;
}

__device__ __forceinline__ void store_y(const ConvShape& p, const Geometry& g, float* y, const Epilogue& e, int m,
                                        int oc, float acc) {
  const int image = m / g.ohw;
  const int pix = m - image * g.ohw;
  const long long idx = (static_cast<long long>(image) * p.k + oc) * g.ohw + pix;
  float v = acc;
  if (e.bias != nullptr) v += __ldg(e.bias + oc);
  if (e.residual != nullptr) v += __ldg(e.residual + idx);
  y[idx] = activate(v, e.act, e.alpha, e.beta);
}

// Split-K: grid layer z = split · groups + group; split s sums K over [k_begin, k_end) (whole
// tiles of bk) and, when there are several splits, writes its partial tile to `partial`
// ([split][group][n][m], m fastest so the writes coalesce) for splitk_reduce, which adds the
// splits in a fixed order (deterministic) and runs the epilogue.
struct KRange {
  int grp, split, k_begin, k_end;
};

__device__ __forceinline__ KRange k_range(const ConvShape& p, const Geometry& g, int bk) {
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

__device__ __forceinline__ void finish(const ConvShape& p, const Geometry& g, float* y, float* partial,
                                       const Epilogue& e, const KRange& r, int m, int n, float acc) {
  if (partial != nullptr) {
    partial[((static_cast<long long>(r.split) * p.groups + r.grp) * g.kg + n) * g.m_total + m] = acc;
  } else {
    store_y(p, g, y, e, m, r.grp * g.kg + n, acc);
  }
}

}  // namespace redwood::cuda::kernels::conv
