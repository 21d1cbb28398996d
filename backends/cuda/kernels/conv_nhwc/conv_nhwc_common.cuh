#pragma once
// What rw.ConvNhwc's tensor-core kernels share (docs/cuda.md, Kernels, the rw.ConvNhwc row): the
// mma.sync kernel (conv_nhwc_mma.cuh) and the Hopper wgmma kernel (conv_nhwc_wgmma.cuh) differ
// only in their math and pipeline schedule. Both take ConvArgs, fill shared-memory stages of
// swizzled 16-byte chunks with ConvLoader, and end with conv_epilogue on an fp32 tile staged in
// shared memory. The implicit GEMM's geometry (M pixels, N output channels, K-dim = R·S·C with
// k = (r·S + s)·C + c) is described in conv_nhwc_mma.cuh.

#include "backends/cuda/kernels/cp_async.cuh"
#include "backends/cuda/kernels/device_math.cuh"
#include "backends/cuda/kernels/kernel_params.hpp"
#include "backends/cuda/kernels/nhwc/nhwc_vec.cuh"

namespace redwood::cuda::kernels::nhwc {

/// Everything one launch needs (by value into the kernel).
template <typename T> struct ConvArgs {
  ConvShape p;          // c is the (padded) channel count of x and w; groups == 1
  const T* x;           // [N, H, W, C]
  const T* w;           // [K, R, S, C]
  T* y;                 // [N, OH, OW, K]
  const T* residual;    // [N, OH, OW, K] or null
  const T* x2;          // the projection shortcut's input [N, p.h2, p.w2, p.c2] or null (ConvShape)
  const float* bias;    // [K] or null
  int act;
  float alpha, beta;
  float* partial;       // split-K: [splits][M][K] fp32
  int* counters;        // split-K: one per output tile, zero at launch
  int m_total, kdim, n_tiles;
  bool round_tf32;      // fp32 storage at precision tf32: stored outputs rounded to tf32 (cvt.rna)
};

/// The fields every rw.ConvNhwc kernel's argument struct has (ConvArgs; the narrow kernel's
/// NarrowArgs, conv_nhwc_narrow.cu): the shape, the operands, the epilogue, the GEMM's M and K-dim.
template <typename T, typename Args>
void fill_conv_operands(Args& a, const ConvShape& p, const void* x, const void* w, void* y, const float* bias,
                        const void* residual, const Epilogue& e) {
  a.p = p;
  a.x = static_cast<const T*>(x);
  a.w = static_cast<const T*>(w);
  a.y = static_cast<T*>(y);
  a.residual = static_cast<const T*>(residual);
  a.bias = bias;
  a.act = e.act;
  a.alpha = e.alpha;
  a.beta = e.beta;
  a.m_total = static_cast<int>(static_cast<long long>(p.n) * p.oh * p.ow);  // plan(): under 2^31
  a.kdim = p.r * p.s * p.c + p.c2;
}

/// ConvArgs with the operands, the epilogue and the GEMM's M and K-dim of a launch; split-K's
/// fields, x2 and round_tf32 are left to the launcher.
template <typename T>
ConvArgs<T> conv_args(const ConvShape& p, const void* x, const void* w, void* y, const float* bias,
                      const void* residual, const Epilogue& e) {
  ConvArgs<T> a{};
  fill_conv_operands<T>(a, p, x, w, y, bias, residual, e);
  return a;
}

// Element offset of (row, 16-byte chunk) in a stage of rows of CHUNKS chunks of E elements each,
// swizzled so that the 8 rows an ldmatrix phase reads (same logical chunk) fall in 8 different
// 16-byte bank groups: rows of 128 bytes (8 chunks) XOR the chunk with row % 8 (also wgmma's
// 128-byte swizzle); rows of 64 bytes (4 chunks; two rows share a 128-byte bank line) with
// (row / 2) % 4.
template <int CHUNKS, int E> __device__ __forceinline__ int swz_chunk(int row, int chunk) {
  static_assert(CHUNKS == 4 || CHUNKS == 8);
  if constexpr (CHUNKS == 8) {
    return (row * 8 + (chunk ^ (row & 7))) * E;
  } else {
    return (row * 4 + (chunk ^ ((row >> 1) & 3))) * E;
  }
}
// The same for 16-bit elements, BK = 32 or 64 of them a row.
template <int BK> __device__ __forceinline__ int swz(int row, int chunk) { return swz_chunk<BK / 8, 8>(row, chunk); }

/// What one block computes: output tile blockIdx.x (BM pixels × BN channels, channel tiles
/// fastest) and, with split-K (gridDim.y splits), split blockIdx.y's K-dim range, whole BK tiles
/// of BK elements (an empty range still writes its zeros).
template <int BM, int BN, int BK> struct ConvBlock {
  int tile_id, m0, n0, splits, split, k_begin, k_end, ktiles;
  template <typename T> __device__ __forceinline__ explicit ConvBlock(const ConvArgs<T>& a) {
    tile_id = blockIdx.x;
    const int n_tile = tile_id % a.n_tiles, m_tile = tile_id / a.n_tiles;
    m0 = m_tile * BM;
    n0 = n_tile * BN;
    splits = gridDim.y;
    split = blockIdx.y;
    const int ktiles_all = (a.kdim + BK - 1) / BK;
    const int per = (ktiles_all + splits - 1) / splits;
    k_begin = min(split * per * BK, a.kdim);
    k_end = min(k_begin + per * BK, a.kdim);
    ktiles = (k_end - k_begin + BK - 1) / BK;
  }
};

/// The operand copies of one block: A (activations, the implicit im2col) and B (weights) of a
/// BM × BN tile into stage rows of CHUNKS 16-byte chunks (E = 16 / sizeof(T) elements each, so
/// BK = CHUNKS · E elements of K-dim a stage), THREADS threads. Every copy is one cp.async of 16
/// bytes: C is a multiple of E, so a chunk never straddles a window position (src-size 0 fills
/// zeros for padding, edges and the K-dim tail). Thread t copies chunk kc = t % CHUNKS of rows
/// row0 + j·kRowStep, the same every k tile; A tiles must be loaded in K order (load_a advances
/// this thread's (r, s, c) by BK each call).
///
/// SC (the kernels' instantiations for a projection shortcut, a.x2, of a 1×1 stride-1 convolution:
/// plan() checks): k < C reads x at the output pixel and k ≥ C reads x2 at (oy·stride2,
/// ox·stride2), channel k − C; C is a multiple of E, so a chunk lies in one of the two. pix_off
/// then holds x2's offsets and ix0 x's (m·C; no window, no padding). A compile-time flag, not a
/// branch on a.x2: a runtime test and its registers in every kernel's main loop make ResNet-50
/// 10 % slower; without SC the loader carries nothing of the shortcut.
template <typename T, int CHUNKS, int BM, int BN, int THREADS, bool SC = false> struct ConvLoader {
  static constexpr int E = 16 / static_cast<int>(sizeof(T)), BK = CHUNKS * E, kRowStep = THREADS / CHUNKS;
  static constexpr int kAJ = BM * CHUNKS / THREADS, kBJ = BN * CHUNKS / THREADS;  // copies per thread
  static_assert(kAJ >= 1 && kBJ >= 1 && BM * CHUNKS % THREADS == 0 && BN * CHUNKS % THREADS == 0,
                "every thread copies whole rows' chunks");

  const ConvArgs<T>& a;
  const int n0, k_end, kc, row0;
  // Per pixel row, its window's corner and the element offset of that corner in x (32 bits:
  // plan() keeps x under 2^31 elements; negative where the window starts in the padding).
  int pix_off[kAJ], iy0[kAJ], ix0[kAJ];
  // This thread's k = k0 + E·kc as (r, s, c), advanced by BK per loaded tile.
  int ka, fc, fr, fs;

  __device__ __forceinline__ ConvLoader(const ConvArgs<T>& args, int m0, int n0_, int k_begin, int k_end_, int t)
      : a(args), n0(n0_), k_end(k_end_), kc(t % CHUNKS), row0(t / CHUNKS) {
    const ConvShape& p = a.p;
    const int ohw = p.oh * p.ow;
#pragma unroll
    for (int j = 0; j < kAJ; ++j) {
      const int m = m0 + row0 + j * kRowStep;
      const bool ok = m < a.m_total;
      const int image = ok ? m / ohw : 0;
      const int pix = ok ? m - image * ohw : 0;
      const int oy = pix / p.ow, ox = pix - oy * p.ow;
      // A pixel past M gets a corner no window position reaches, so its copies fill zeros.
      iy0[j] = ok ? oy * p.stride_h - p.pad_h : -(1 << 29);
      ix0[j] = ox * p.stride_w - p.pad_w;
      if constexpr (SC) {
        pix_off[j] = ((image * p.h2 + oy * p.stride2) * p.w2 + ox * p.stride2) * p.c2;
        ix0[j] = m * p.c;
      } else {
        pix_off[j] = ((image * p.h + oy * p.stride_h - p.pad_h) * p.w + ix0[j]) * p.c;
      }
    }
    ka = k_begin + kc * E;
    const int rs = ka / p.c;
    fc = ka - rs * p.c;
    fr = rs / p.s;
    fs = rs - fr * p.s;
  }

  /// B: weights, a plain [K][Kdim] matrix; the tile at k0 into the stage at bs.
  __device__ __forceinline__ void load_b(T* bs, int k0) const {
    const int k = k0 + kc * E;
#pragma unroll
    for (int j = 0; j < kBJ; ++j) {
      const int row = row0 + j * kRowStep, n = n0 + row;
      const bool ok = n < a.p.k && k < k_end;
      cp_async16(bs + swz_chunk<CHUNKS, E>(row, kc), ok ? a.w + static_cast<long long>(n) * a.kdim + k : a.w, ok);
    }
  }

  /// A: the next K tile of this block's pixels' windows into the stage at as.
  __device__ __forceinline__ void load_a(T* as) {
    const ConvShape& p = a.p;
    const bool k_ok = ka < k_end;
    if constexpr (SC) {  // the projection shortcut: x (1×1, stride 1) for k < C, then x2
      const bool first = ka < p.c;
#pragma unroll
      for (int j = 0; j < kAJ; ++j) {
        const bool ok = k_ok && iy0[j] >= 0;
        const T* src = first ? a.x + ix0[j] + ka : a.x2 + pix_off[j] + (ka - p.c);
        cp_async16(as + swz_chunk<CHUNKS, E>(row0 + j * kRowStep, kc), ok ? src : a.x, ok);
      }
      ka += BK;
      return;
    }
    const int dy = fr * p.dil_h, dx = fs * p.dil_w;
    const int delta = (dy * p.w + dx) * p.c + fc;  // (r, s, c)'s offset from the window's corner
#pragma unroll
    for (int j = 0; j < kAJ; ++j) {
      const bool ok = k_ok && static_cast<unsigned>(iy0[j] + dy) < static_cast<unsigned>(p.h) &&
                      static_cast<unsigned>(ix0[j] + dx) < static_cast<unsigned>(p.w);
      cp_async16(as + swz_chunk<CHUNKS, E>(row0 + j * kRowStep, kc), a.x + (ok ? pix_off[j] + delta : 0), ok);
    }
    ka += BK;
    fc += BK;
    while (fc >= p.c) {  // C < BK (the stem's 8 or 4 channels) wraps several window positions
      fc -= p.c;
      if (++fs == p.s) {
        fs = 0;
        ++fr;
      }
    }
  }
};

/// conv_epilogue's single-split path where every thread keeps one 8-channel column (THREADS a
/// multiple of BN / 8) and the same number of rows (BM·BN/8 a multiple of THREADS): the thread
/// loads its residual vectors for up to 8 rows back to back before it adds, activates and stores
/// any of them. A loop of load → add → store per row waits one memory latency per row (the
/// compiler cannot move a row's residual load above the previous row's store: y and residual
/// may alias as far as it knows), which made the 1×1 expansions with a residual, whose blocks are
/// mostly epilogue, latency-bound (docs/cuda.md, Kernels). The bias is read once
/// (the column is fixed); the sums are those of the general path, in its order. Rows past the
/// last pixel (M's tail) and columns past K are neither loaded nor stored.
/// ACT: the activation, known at compile time (kActNone or kActRelu).
template <typename T, int BM, int BN, int LDC, int THREADS, int ACT>
__device__ __forceinline__ void conv_epilogue_rows(const ConvArgs<T>& a, const float* cs, int m0, int n0, int t) {
  constexpr int kCols = BN / 8, kRowStep = THREADS / kCols, kRows = BM * kCols / THREADS;
  constexpr int kBatch = kRows < 8 ? kRows : 8;
  static_assert(kRows % kBatch == 0, "rows a thread are a power of two");
  const ConvShape& p = a.p;
  const int col = (t % kCols) * 8, row0 = t / kCols, n = n0 + col;
  if (n >= p.k) return;
  float b[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  if (a.bias != nullptr) load8_f32(a.bias + n, b);
  // Row r of this thread is pixel m0 + row0 + r·kRowStep: pointers step kRowStep pixels a row.
  const long long first = static_cast<long long>(m0 + row0) * p.k + n, step = static_cast<long long>(kRowStep) * p.k;
  const T* res_at = a.residual != nullptr ? a.residual + first : nullptr;
  T* y_at = a.y + first;
  const float* cs_at = cs + row0 * LDC + col;
  const int rows_left = a.m_total - (m0 + row0);  // rows r with r·kRowStep < rows_left exist
#pragma unroll
  for (int r0 = 0; r0 < kRows; r0 += kBatch) {
    Raw8<T> res[kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      res[i] = Raw8<T>{};
      if (res_at != nullptr && (r0 + i) * kRowStep < rows_left) res[i] = load_raw8(res_at + (r0 + i) * step);
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int r = r0 + i;
      if (r * kRowStep >= rows_left) break;
      const float4 lo = *reinterpret_cast<const float4*>(cs_at + r * kRowStep * LDC);
      const float4 hi = *reinterpret_cast<const float4*>(cs_at + r * kRowStep * LDC + 4);
      float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
      float rv[8];
      widen8(res[i], rv);  // zeros without a residual
#pragma unroll
      for (int q = 0; q < 8; ++q) v[q] = activate(v[q] + b[q] + rv[q], ACT, a.alpha, a.beta);
      if constexpr (std::is_same_v<T, float>) round_tf32_if(a.round_tf32, v);
      store8(y_at + r * step, v);
    }
  }
}

/// The end of both kernels, after the accumulators are staged as fp32 cs[BM][LDC] (and a barrier):
/// each step takes 8 adjacent output channels of one pixel, + bias (fp32), + residual (8 values of
/// T), activation (kernels::activate, the Conv's codes), rounded to T once and stored (nhwc_vec.cuh:
/// 16 bytes of a 16-bit type, 32 of fp32). A single split with Relu or no activation takes
/// conv_epilogue_rows (above), the same sums with the residual loads batched.
///
/// Split-K (splits > 1): each split writes its fp32 tile to the workspace, and the last block of
/// a tile to arrive (a counter per tile, which launch_conv_nhwc zeroes before the kernel and the
/// last block resets) adds the splits in the fixed order 0, 1, … and stores, so results do not
/// depend on arrival order.
template <typename T, int BM, int BN, int LDC, int THREADS>
__device__ __forceinline__ void conv_epilogue(const ConvArgs<T>& a, const float* cs, int m0, int n0, int tile_id,
                                              int split, int splits, int t) {
  const ConvShape& p = a.p;
  auto store = [&](int m, int n, float (&v)[8]) {
    const long long at = static_cast<long long>(m) * p.k + n;
    if (a.bias != nullptr) {
      float b[8];
      load8_f32(a.bias + n, b);
#pragma unroll
      for (int q = 0; q < 8; ++q) v[q] += b[q];
    }
    if (a.residual != nullptr) {
      float r[8];
      load8(a.residual + at, r);
#pragma unroll
      for (int q = 0; q < 8; ++q) v[q] += r[q];
    }
#pragma unroll
    for (int q = 0; q < 8; ++q) v[q] = activate(v[q], a.act, a.alpha, a.beta);
    if constexpr (std::is_same_v<T, float>) round_tf32_if(a.round_tf32, v);
    store8(a.y + at, v);
  };
  constexpr int kCols = BN / 8, kSteps = BM * kCols;
  if constexpr (kSteps % THREADS == 0 && THREADS % kCols == 0) {
    // Other activations (MobileNet's hard-swish layers, which carry no residual) take the loop
    // below: unrolled over the rows, the activation's switch would cost code for no saved latency.
    if (splits == 1 && a.act == kActRelu) {
      conv_epilogue_rows<T, BM, BN, LDC, THREADS, kActRelu>(a, cs, m0, n0, t);
      return;
    }
    if (splits == 1 && a.act == kActNone) {
      conv_epilogue_rows<T, BM, BN, LDC, THREADS, kActNone>(a, cs, m0, n0, t);
      return;
    }
  }
  if (splits == 1) {
    for (int idx = t; idx < kSteps; idx += THREADS) {
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
  for (int idx = t; idx < kSteps; idx += THREADS) {
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
  for (int idx = t; idx < kSteps; idx += THREADS) {
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
