#pragma once
// Implicit-GEMM convolution on NHWC 16-bit activations (rw.ConvNhwc; docs/cuda.md, Kernels, the
// rw.ConvNhwc row): tensor cores (mma.sync m16n8k16, fp32 accumulation) fed from a 3- or 4-stage
// cp.async pipeline of 16-byte copies.
//
//   M = N·OH·OW output pixels, N-dim = K output channels, K-dim = R·S·C with k = (r·S + s)·C + c.
//   A[m][k] = x[image, oy·sh − ph + r·dh, ox·sw − pw + s·dw, c]   (zero outside the image)
//   B[n][k] = w[n, r, s, c]: the weights [K, R, S, C] are already the rows of B.
//
// Both operands are contiguous along C and C % 8 == 0, so a 16-byte vector of 8 channels never
// straddles a window position: every copy is one cp.async of 16 bytes (src-size 0 fills zeros for
// padding, edges and the K-dim tail). Shared memory holds each stage's A as [BM][BK] and B as
// [BN][BK] (BK = 32 or 64: rows of 4 or 8 chunks of 16 bytes), each row's chunks XOR-swizzled
// (swz below): the 8 rows an ldmatrix phase reads then cover all 32 banks, and the copies stay
// whole 16-byte chunks. Fragments come from ldmatrix.x4 (A: one m16k16 fragment; B:
// two n8k16 fragments, since B is stored [n][k], the .col operand's layout).
//
// Epilogue: the accumulators are staged through shared memory as fp32 [BM][BN + 4]; each thread
// then takes 8 adjacent output channels of one pixel: + bias (fp32), + residual (16 bytes of S),
// activation (kernels::activate, the Conv's codes), rounded to S once and stored as 16 bytes.
//
// Split-K (small M, e.g. batch 1 on 7×7 outputs): blockIdx.y is the split; each split writes its
// fp32 tile to the workspace, and the last block of a tile to arrive (a counter per tile, which
// launch_conv_nhwc zeroes before the kernel and the last block resets) adds the splits in the
// fixed order 0, 1, … and runs the epilogue, so results do not depend on arrival order.
//
// Programmatic dependent launch (pdl.cuh): the weight tiles of the first stages are copied before
// pdl_wait(); activations, the residual and every global write come after it.
//
// T is the storage type (half or __nv_bfloat16), with its mma and conversions in Mma16<T>. An
// fp32/tf32 instantiation (not built) would add a traits type for fp32 with m16n8k8 tf32, 4
// elements per 16-byte chunk (swz, the k-state step, the stage sizes in bytes), fragment reads of
// 32-bit elements (ldmatrix moves 16-bit matrices) and fp32 stores in the epilogue; the geometry,
// pipeline, split-K and epilogue math stay as they are.

#include "backends/cuda/kernels/cp_async.cuh"
#include "backends/cuda/kernels/device_math.cuh"
#include "backends/cuda/kernels/mma_ops.cuh"
#include "backends/cuda/kernels/kernel_params.hpp"
#include "backends/cuda/kernels/pdl.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace redwood::cuda::kernels::nhwc {

/// Everything one launch needs (by value into the kernel).
template <typename T> struct ConvArgs {
  ConvShape p;          // c is the (padded) channel count of x and w; groups == 1
  const T* x;           // [N, H, W, C]
  const T* w;           // [K, R, S, C]
  T* y;                 // [N, OH, OW, K]
  const T* residual;    // [N, OH, OW, K] or null
  const float* bias;    // [K] or null
  int act;
  float alpha, beta;
  float* partial;       // split-K: [splits][M][K] fp32
  int* counters;        // split-K: one per output tile, zero at launch
  int m_total, kdim, n_tiles;
};

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}

/// Per storage type: the mma and conversions of pairs to and from fp32 (mma_ops.cuh).
template <typename T> struct Mma16 {
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    mma_m16n8k16<T>(d, a, b0, b1);
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) { return pack2<T>(lo, hi); }
  static __device__ __forceinline__ float2 unpack(uint32_t v) { return unpack2<T>(v); }
};

/// Block tile BM × BN, warp tile WM × WN, BK 16-bit elements of K-dim a stage (32 or 64: rows of
/// 4 or 8 chunks of 16 bytes), kStages stages.
template <int BM, int BN, int WM, int WN, int BK = 32, int STAGES = 4, bool DB = true> struct Tile {
  static constexpr int kBK = BK, kChunks = BK / 8, kStages = STAGES;
  static constexpr bool kDoubleBuffer = DB;  // fragments double-buffered (more registers)
  static constexpr int kWarpsM = BM / WM, kWarps = kWarpsM * (BN / WN), kThreads = kWarps * 32;
  static constexpr int kMI = WM / 16, kNI = WN / 8;
  static constexpr int kAJ = BM * kChunks / kThreads, kBJ = BN * kChunks / kThreads;  // copies per thread
  static constexpr int kLDC = BN + 4;  // the epilogue's fp32 rows (stride ≡ 4 mod 32 words)
  static constexpr int kStageElems = (BM + BN) * kBK;
  static constexpr int kPipeBytes = kStages * kStageElems * 2;
  static constexpr int kSmemBytes = kPipeBytes > BM * kLDC * 4 ? kPipeBytes : BM * kLDC * 4;
  // Blocks per multiprocessor to leave registers for (65536 a multiprocessor): 8-warp blocks 2
  // (128 a thread; 1 for 8 warps of 64×64), 4-warp blocks of 64×64 warp tiles 2, other 4-warp
  // blocks 3 with double-buffered fragments (170), else 4 (128). Never more than the shared
  // memory holds (227 KiB), so that a large pipeline does not cap registers for nothing.
  static constexpr int kByRegs = kThreads == 256 ? (kMI * kNI * 4 >= 128 ? 1 : 2)
                                 : kMI * kNI * 4 >= 128 ? 2
                                 : DB                   ? 3
                                                        : 4;
  static constexpr int kBySmem = 227 * 1024 / kSmemBytes < 1 ? 1 : 227 * 1024 / kSmemBytes;
  static constexpr int kMinBlocks = kByRegs < kBySmem ? kByRegs : kBySmem;
  static_assert(BK == 32 || BK == 64, "rows of 4 or 8 chunks (the swizzle)");
  static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 16 == 0, "ldmatrix.x4 takes n16 of B");
  static_assert(kAJ >= 1 && kBJ >= 1 && BM * kChunks % kThreads == 0 && BN * kChunks % kThreads == 0,
                "every thread copies whole rows' chunks");
};

// Element offset of (row, 16-byte chunk) in a [rows][BK] stage, swizzled so that the 8 rows an
// ldmatrix phase reads (same logical chunk) fall in 8 different 16-byte bank groups: rows of 128
// bytes (BK 64) XOR the chunk with row % 8; rows of 64 bytes (BK 32; two rows share a 128-byte bank
// line) with (row / 2) % 4.
template <int BK> __device__ __forceinline__ int swz(int row, int chunk) {
  if constexpr (BK == 64) {
    return row * 64 + ((chunk ^ (row & 7)) << 3);
  } else {
    return row * 32 + ((chunk ^ ((row >> 1) & 3)) << 3);
  }
}

template <typename T, int BM, int BN, int WM, int WN, int BK_, int STAGES, bool DB>
__global__ void __launch_bounds__(Tile<BM, BN, WM, WN, BK_, STAGES, DB>::kThreads,
                                  Tile<BM, BN, WM, WN, BK_, STAGES, DB>::kMinBlocks)
    conv_nhwc_mma(ConvArgs<T> a) {
  using Tl = Tile<BM, BN, WM, WN, BK_, STAGES, DB>;
  using Op = Mma16<T>;
  constexpr int BK = Tl::kBK, kStages = Tl::kStages, kThreads = Tl::kThreads;
  static_assert(BK == BK_);
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* const as_all = reinterpret_cast<T*>(smem_raw);
  T* const bs_all = as_all + kStages * BM * BK;

  const ConvShape& p = a.p;
  const int tile_id = blockIdx.x;
  const int n_tile = tile_id % a.n_tiles, m_tile = tile_id / a.n_tiles;
  const int m0 = m_tile * BM, n0 = n_tile * BN;
  const int splits = gridDim.y, split = blockIdx.y;
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;

  // This split's K-dim range, whole BK tiles (an empty range still writes its zeros).
  const int ktiles_all = (a.kdim + BK - 1) / BK;
  const int per = (ktiles_all + splits - 1) / splits;
  const int k_begin = min(split * per * BK, a.kdim);
  const int k_end = min(k_begin + per * BK, a.kdim);
  const int ktiles = (k_end - k_begin + BK - 1) / BK;

  // ---- copies: thread t copies chunk kc of rows row0 + j·kRowStep, the same every k tile.
  constexpr int kCpr = Tl::kChunks, kRowStep = kThreads / kCpr;
  const int kc = t % kCpr, row0 = t / kCpr;

  // B: weights, a plain [K][Kdim] matrix.
  auto load_b = [&](int stage, int k0) {
    T* bs = bs_all + stage * BN * BK;
    const int k = k0 + kc * 8;
#pragma unroll
    for (int j = 0; j < Tl::kBJ; ++j) {
      const int row = row0 + j * kRowStep, n = n0 + row;
      const bool ok = n < p.k && k < k_end;
      cp_async16(bs + swz<BK>(row, kc), ok ? a.w + static_cast<long long>(n) * a.kdim + k : a.w, ok);
    }
  };

  // A: per pixel row, its window's corner and the element offset of that corner in x (32 bits:
  // plan() keeps x under 2^31 elements; negative where the window starts in the padding).
  int pix_off[Tl::kAJ], iy0[Tl::kAJ], ix0[Tl::kAJ];
  const int ohw = p.oh * p.ow;
#pragma unroll
  for (int j = 0; j < Tl::kAJ; ++j) {
    const int m = m0 + row0 + j * kRowStep;
    const bool ok = m < a.m_total;
    const int image = ok ? m / ohw : 0;
    const int pix = ok ? m - image * ohw : 0;
    const int oy = pix / p.ow, ox = pix - oy * p.ow;
    // A pixel past M gets a corner no window position reaches, so its copies fill zeros.
    iy0[j] = ok ? oy * p.stride_h - p.pad_h : -(1 << 29);
    ix0[j] = ox * p.stride_w - p.pad_w;
    pix_off[j] = ((image * p.h + oy * p.stride_h - p.pad_h) * p.w + ix0[j]) * p.c;
  }
  // This thread's k = k0 + 8·kc as (r, s, c), advanced by BK per loaded tile (tiles load in order).
  int ka = k_begin + kc * 8;
  int fc, fr, fs;
  {
    const int rs = ka / p.c;
    fc = ka - rs * p.c;
    fr = rs / p.s;
    fs = rs - fr * p.s;
  }
  auto load_a = [&](int stage) {
    T* as = as_all + stage * BM * BK;
    const bool k_ok = ka < k_end;
    const int dy = fr * p.dil_h, dx = fs * p.dil_w;
    const int delta = (dy * p.w + dx) * p.c + fc;  // (r, s, c)'s offset from the window's corner
#pragma unroll
    for (int j = 0; j < Tl::kAJ; ++j) {
      const bool ok = k_ok && static_cast<unsigned>(iy0[j] + dy) < static_cast<unsigned>(p.h) &&
                      static_cast<unsigned>(ix0[j] + dx) < static_cast<unsigned>(p.w);
      cp_async16(as + swz<BK>(row0 + j * kRowStep, kc), a.x + (ok ? pix_off[j] + delta : 0), ok);
    }
    ka += BK;
    fc += BK;
    while (fc >= p.c) {  // C < BK (the stem's 8 channels) wraps several window positions
      fc -= p.c;
      if (++fs == p.s) {
        fs = 0;
        ++fr;
      }
    }
  };

  float acc[Tl::kMI][Tl::kNI][4];
#pragma unroll
  for (int i = 0; i < Tl::kMI; ++i)
#pragma unroll
    for (int j = 0; j < Tl::kNI; ++j)
#pragma unroll
      for (int v = 0; v < 4; ++v) acc[i][j][v] = 0.f;

  // Prologue: the first stages' weights before pdl_wait (no kernel writes them), then the
  // activations. Group 0 holds B of stages 0..kStages-2 and A of stage 0; group s, A of stage s:
  // groups complete in order, so "group s done" still means "stage s landed".
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < ktiles) load_b(s, k_begin + s * BK);
  }
  pdl_wait();
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < ktiles) load_a(s);
    cp_async_commit();  // empty groups keep the count the waits rely on
  }

  // With DB, fragments are double-buffered: a k-step's ldmatrix is issued before the previous
  // k-step's mma (the asm statements keep their order, so the source order is the schedule), and
  // the next tile's first fragments are read before this tile's last mma. Without (tiles whose
  // registers are short), each k-step reads its fragments and then multiplies.
  const int wm0 = (warp % Tl::kWarpsM) * WM, wn0 = (warp / Tl::kWarpsM) * WN;
  constexpr int KS = BK / 16, kBufs = DB ? 2 : 1;
  uint32_t af[kBufs][Tl::kMI][4], bf[kBufs][Tl::kNI][2];
  auto load_frags = [&](int buf, int stage, int ks) {
    const T* as = as_all + stage * BM * BK;
    const T* bs = bs_all + stage * BN * BK;
#pragma unroll
    for (int i = 0; i < Tl::kMI; ++i) {
      ldmatrix_x4(af[buf][i], as + swz<BK>(wm0 + 16 * i + (lane & 15), 2 * ks + (lane >> 4)));
    }
#pragma unroll
    for (int j = 0; j < Tl::kNI; j += 2) {
      uint32_t r[4];
      ldmatrix_x4(r, bs + swz<BK>(wn0 + 8 * j + (lane & 7) + ((lane >> 4) << 3), 2 * ks + ((lane >> 3) & 1)));
      bf[buf][j][0] = r[0];
      bf[buf][j][1] = r[1];
      bf[buf][j + 1][0] = r[2];
      bf[buf][j + 1][1] = r[3];
    }
  };
  auto mma_step = [&](int buf) {
#pragma unroll
    for (int i = 0; i < Tl::kMI; ++i)
#pragma unroll
      for (int j = 0; j < Tl::kNI; ++j) Op::mma(acc[i][j], af[buf][i], bf[buf][j][0], bf[buf][j][1]);
  };
  if constexpr (DB) {
    cp_async_wait<kStages - 2>();  // tile 0 has landed (this thread's copies) ...
    __syncthreads();               // ... everyone's
    if (ktiles > 0) load_frags(0, 0, 0);
    for (int kt = 0; kt < ktiles; ++kt) {
      // Tile kt + kStages − 1 goes to the stage of tile kt − 1, which every warp finished reading
      // before the barrier that made tile kt visible.
      const int next = kt + kStages - 1;
      if (next < ktiles) {
        load_b(next % kStages, k_begin + next * BK);
        load_a(next % kStages);
      }
      cp_async_commit();
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        if (ks == KS - 1) {
          cp_async_wait<kStages - 2>();  // tile kt + 1 has landed ...
          __syncthreads();               // ... everyone's, and nobody reads tile kt's stage any more
          if (kt + 1 < ktiles) load_frags((ks + 1) & 1, (kt + 1) % kStages, 0);
        } else {
          load_frags((ks + 1) & 1, kt % kStages, ks + 1);
        }
        mma_step(ks & 1);
      }
    }
  } else {
    for (int kt = 0; kt < ktiles; ++kt) {
      cp_async_wait<kStages - 2>();  // tile kt has landed (this thread's copies) ...
      __syncthreads();               // ... everyone's, and everyone is done with tile kt − 1's stage
      const int next = kt + kStages - 1;
      if (next < ktiles) {
        load_b(next % kStages, k_begin + next * BK);
        load_a(next % kStages);
      }
      cp_async_commit();
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        load_frags(0, kt % kStages, ks);
        mma_step(0);
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the pipeline's memory becomes the fp32 [BM][BN + 4] output tile
  pdl_launch_dependents();

  // c0 c1: (m g, n 2t, 2t+1); c2 c3: (m g+8, same n).
  float* const cs = reinterpret_cast<float*>(smem_raw);
  constexpr int LDC = Tl::kLDC;
  {
    const int g = lane >> 2, tq = lane & 3;
#pragma unroll
    for (int i = 0; i < Tl::kMI; ++i)
#pragma unroll
      for (int j = 0; j < Tl::kNI; ++j) {
        const int row = wm0 + 16 * i + g, col = wn0 + 8 * j + 2 * tq;
        *reinterpret_cast<float2*>(cs + row * LDC + col) = make_float2(acc[i][j][0], acc[i][j][1]);
        *reinterpret_cast<float2*>(cs + (row + 8) * LDC + col) = make_float2(acc[i][j][2], acc[i][j][3]);
      }
  }
  __syncthreads();

  // 8 channels of one pixel per step: + bias, + residual, activation, rounded to T, 16 bytes out.
  auto store = [&](int m, int n, float (&v)[8]) {
    const long long at = static_cast<long long>(m) * p.k + n;
    if (a.bias != nullptr) {
      const float4 b0 = __ldg(reinterpret_cast<const float4*>(a.bias + n));
      const float4 b1 = __ldg(reinterpret_cast<const float4*>(a.bias + n + 4));
      v[0] += b0.x, v[1] += b0.y, v[2] += b0.z, v[3] += b0.w;
      v[4] += b1.x, v[5] += b1.y, v[6] += b1.z, v[7] += b1.w;
    }
    if (a.residual != nullptr) {
      const uint4 r = *reinterpret_cast<const uint4*>(a.residual + at);
      const uint32_t rr[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const float2 f = Op::unpack(rr[q]);
        v[2 * q] += f.x;
        v[2 * q + 1] += f.y;
      }
    }
#pragma unroll
    for (int q = 0; q < 8; ++q) v[q] = activate(v[q], a.act, a.alpha, a.beta);
    uint4 o;
    o.x = Op::pack(v[0], v[1]);
    o.y = Op::pack(v[2], v[3]);
    o.z = Op::pack(v[4], v[5]);
    o.w = Op::pack(v[6], v[7]);
    *reinterpret_cast<uint4*>(a.y + at) = o;
  };
  constexpr int kCols = BN / 8, kSteps = BM * kCols;
  if (splits == 1) {
    for (int idx = t; idx < kSteps; idx += kThreads) {
      const int row = idx / kCols, col = (idx % kCols) * 8;
      const int m = m0 + row, n = n0 + col;
      if (m >= a.m_total || n >= p.k) continue;
      const float4 lo = *reinterpret_cast<const float4*>(cs + row * LDC + col);
      const float4 hi = *reinterpret_cast<const float4*>(cs + row * LDC + col + 4);
      float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
      store(m, n, v);
    }
    return;
  }
  // Split-K: this split's partial tile, then the last block of the tile sums all in split order.
  const long long plane = static_cast<long long>(a.m_total) * p.k;
  for (int idx = t; idx < kSteps; idx += kThreads) {
    const int row = idx / kCols, col = (idx % kCols) * 8;
    const int m = m0 + row, n = n0 + col;
    if (m >= a.m_total || n >= p.k) continue;
    float* dst = a.partial + split * plane + static_cast<long long>(m) * p.k + n;
    reinterpret_cast<float4*>(dst)[0] = *reinterpret_cast<const float4*>(cs + row * LDC + col);
    reinterpret_cast<float4*>(dst)[1] = *reinterpret_cast<const float4*>(cs + row * LDC + col + 4);
  }
  __threadfence();  // this block's partial sums are visible device-wide before it counts itself
  __syncthreads();
  __shared__ int is_last;
  if (t == 0) {
    const int arrived = atomicAdd(a.counters + tile_id, 1);
    is_last = arrived == splits - 1;
  }
  __syncthreads();
  if (!is_last) return;
  __threadfence();  // the other splits' sums, counted before this block's increment, are visible
  for (int idx = t; idx < kSteps; idx += kThreads) {
    const int row = idx / kCols, col = (idx % kCols) * 8;
    const int m = m0 + row, n = n0 + col;
    if (m >= a.m_total || n >= p.k) continue;
    float v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    const float* src = a.partial + static_cast<long long>(m) * p.k + n;
    for (int s = 0; s < splits; ++s) {  // fixed order: deterministic whichever block is last
      const float4 lo = __ldcg(reinterpret_cast<const float4*>(src + s * plane));
      const float4 hi = __ldcg(reinterpret_cast<const float4*>(src + s * plane + 4));
      v[0] += lo.x, v[1] += lo.y, v[2] += lo.z, v[3] += lo.w;
      v[4] += hi.x, v[5] += hi.y, v[6] += hi.z, v[7] += hi.w;
    }
    store(m, n, v);
  }
  if (t == 0) a.counters[tile_id] = 0;  // ready for the next launch (which zeroes it anyway)
}

}  // namespace redwood::cuda::kernels::nhwc
