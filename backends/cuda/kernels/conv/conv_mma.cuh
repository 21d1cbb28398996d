#pragma once
// Implicit-GEMM convolution on tensor cores: mma.sync (m16n8k16 for fp16/bf16, m16n8k8 for tf32,
// fp32 accumulation) fed from shared memory that a 3-stage cp.async pipeline fills.
//
// Shared memory holds fp32 (the tensors' type; cp.async copies bytes and cannot convert): each
// stage has A as [BK][BM + padA] (k rows, pixels contiguous: x's layout, so the copies of a warp
// coalesce) and B as [BN][BK + padB] (the weights' rows). Operands are rounded to the mma type as
// fragments are read. The pads make the fragment reads free of bank conflicts: for fp16/bf16 a
// lane (g = lane/4, t = lane%4) reads A[k = 2t][m = g] (row stride ≡ 4 mod 32 → banks 8t + g) and
// B[n = g][k = 2t..2t+1] as float2 (row stride ≡ 8 mod 32); tf32 reads A[k = t][m = g] (stride
// ≡ 8) and B[n = g][k = t] (stride ≡ 4).
//
// Loads: A is gathered with 4-byte cp.async (zero-fill for padding and the edges); a 1×1,
// stride-1, unpadded convolution whose output planes are a multiple of 4 pixels reads A as
// 16-byte vectors (4 contiguous pixels of one channel). B (weights) goes by 16-byte vectors when
// a row's length Kdim is a multiple of 4, else by 4-byte copies. The epilogue stages the tile
// through shared memory as [n][m] and writes pixels contiguously (or the split's partial sums).

#include "backends/cuda/kernels/conv/conv_common.cuh"
#include "backends/cuda/kernels/cp_async.cuh"
#include "backends/cuda/kernels/mma_ops.cuh"
#include "backends/cuda/kernels/pdl.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace redwood::cuda::kernels::conv {

struct Tf32 {};

// Per operand type: k of one mma, shared-memory pads, fragment reads, the mma itself.
template <typename T> struct MmaOp;

template <typename T> struct MmaOp16 {
  static constexpr int kK = 16, kPadA = 4, kPadB = 8;
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) { return pack2<T>(lo, hi); }
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    mma_m16n8k16<T>(d, a, b[0], b[1]);
  }
  // A fragment of rows [r, r+16) at k column kk: a0a1 (g, 2t..), a2a3 (g+8, 2t..), a4a5 (g, 2t+8..),
  // a6a7 (g+8, 2t+8..).
  static __device__ __forceinline__ void load_a(uint32_t (&f)[4], const float* as, int lda, int kk, int r, int lane) {
    const int g = lane >> 2, t = lane & 3;
    const float* a = as + (kk + 2 * t) * lda + r + g;
    f[0] = pack(a[0], a[lda]);
    f[1] = pack(a[8], a[lda + 8]);
    f[2] = pack(a[8 * lda], a[9 * lda]);
    f[3] = pack(a[8 * lda + 8], a[9 * lda + 8]);
  }
  // B fragment of columns [c, c+8): b0b1 (k 2t.., n g), b2b3 (k 2t+8.., n g).
  static __device__ __forceinline__ void load_b(uint32_t (&f)[2], const float* bs, int ldb, int kk, int c, int lane) {
    const int g = lane >> 2, t = lane & 3;
    const float* b = bs + (c + g) * ldb + kk + 2 * t;
    const float2 lo = *reinterpret_cast<const float2*>(b);
    const float2 hi = *reinterpret_cast<const float2*>(b + 8);
    f[0] = pack(lo.x, lo.y);
    f[1] = pack(hi.x, hi.y);
  }
};

template <> struct MmaOp<half> : MmaOp16<half> {};
template <> struct MmaOp<__nv_bfloat16> : MmaOp16<__nv_bfloat16> {};

template <> struct MmaOp<Tf32> {
  static constexpr int kK = 8, kPadA = 8, kPadB = 4;
  static __device__ __forceinline__ uint32_t cvt(float v) { return to_tf32(v); }
  // a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4).
  static __device__ __forceinline__ void load_a(uint32_t (&f)[4], const float* as, int lda, int kk, int r, int lane) {
    const int g = lane >> 2, t = lane & 3;
    const float* a = as + (kk + t) * lda + r + g;
    f[0] = cvt(a[0]);
    f[1] = cvt(a[8]);
    f[2] = cvt(a[4 * lda]);
    f[3] = cvt(a[4 * lda + 8]);
  }
  // b0 (k t, n g), b1 (k t+4, n g).
  static __device__ __forceinline__ void load_b(uint32_t (&f)[2], const float* bs, int ldb, int kk, int c, int lane) {
    const int g = lane >> 2, t = lane & 3;
    const float* b = bs + (c + g) * ldb + kk + t;
    f[0] = cvt(b[0]);
    f[1] = cvt(b[4]);
  }
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    mma_m16n8k8_tf32(d, a, b[0], b[1]);
  }
};

/// Block tile BM × BN, warp tile WM × WN, BK = 32, 3 stages.
template <int BM, int BN, int WM, int WN> struct MmaTile {
  static constexpr int kBK = 32, kStages = 3;
  static constexpr int kWarpsM = BM / WM, kWarps = kWarpsM * (BN / WN), kThreads = kWarps * 32;
  static constexpr int kMI = WM / 16, kNI = WN / 8;
  // Blocks per multiprocessor to reserve registers for: 64×64 warp tiles (128 accumulators a
  // thread) and 8-warp blocks get 2, smaller 4-warp tiles 3.
  static constexpr int kMinBlocks = kThreads == 256 || kMI * kNI * 4 >= 128 ? 2 : 3;
  template <typename T> static constexpr int lda() { return BM + MmaOp<T>::kPadA; }
  template <typename T> static constexpr int ldb() { return kBK + MmaOp<T>::kPadB; }
  template <typename T> static constexpr int stage_floats() { return kBK * lda<T>() + BN * ldb<T>(); }
  template <typename T> static constexpr int smem_bytes() { return kStages * stage_floats<T>() * 4; }
  static_assert(BM % 32 == 0 && WM % 16 == 0 && WN % 8 == 0 && BM % WM == 0 && BN % WN == 0);
  static_assert(kBK % (kThreads / 32) == 0, "the scalar A copies give each thread whole k rows");
  static_assert(kThreads % (BM / 4) == 0 && kBK % (kThreads / (BM / 4)) == 0, "the vector A copies");
  static_assert((BN * kBK) % kThreads == 0 && (BN * kBK / 4) % kThreads == 0, "the B copies");
};

/// Arrival counters of the split-K tiles reduced in the kernel: zero at module load, each launch
/// leaves its own at zero again. Ranges of it are handed out on the host (SplitKCounters,
/// conv_kernels.cu), so kernels that may run at the same time never share a counter.
inline constexpr int kTileCounterPool = 1 << 20;
static __device__ unsigned g_tile_counters[kTileCounterPool];

/// flags: kVecA (1×1, stride 1, no padding, OH·OW % 4 == 0), kVecB (Kdim % 4 == 0), kVecC
/// (OH·OW % 4 == 0: float4 epilogue; y, the residual and the partial sums 16-byte aligned),
/// kConstW (w is a constant of the plan: the first stages' weight copies start before pdl_wait()).
enum : int { kVecA = 1, kVecB = 2, kVecC = 16, kConstW = 32 };

template <typename T, int BM, int BN, int WM, int WN>
__global__ void __launch_bounds__(MmaTile<BM, BN, WM, WN>::kThreads, MmaTile<BM, BN, WM, WN>::kMinBlocks)
    conv_mma(ConvShape p, const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y, Epilogue e,
             float* __restrict__ partial, int flags, int counters) {
  using Tile = MmaTile<BM, BN, WM, WN>;
  using Op = MmaOp<T>;
  constexpr int BK = Tile::kBK, kStages = Tile::kStages, kThreads = Tile::kThreads;
  constexpr int LDA = Tile::template lda<T>(), LDB = Tile::template ldb<T>();
  constexpr int kAStage = BK * LDA, kBStage = BN * LDB;
  constexpr int LDC = BM + 4;
  static_assert(BN * LDC <= kStages * (kAStage + kBStage), "the epilogue's [n][m] tile fits in the pipeline's memory");
  extern __shared__ float4 smem4[];
  float* const smem = reinterpret_cast<float*>(smem4);
  float* const as_all = smem;
  float* const bs_all = smem + kStages * kAStage;

  const Geometry g = geometry(p);
  const KRange kr = k_range(p, g, BK);
  const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
  const bool vec_a = (flags & kVecA) != 0, vec_b = (flags & kVecB) != 0;
  const long long hw = static_cast<long long>(p.h) * p.w;
  const float* const xg = x + static_cast<long long>(kr.grp) * g.cg * hw;
  const float* const wg = w + static_cast<long long>(kr.grp) * g.kg * g.kdim;

  // ---- A copies: the pixels this thread copies are the same for every k tile; decode them once.
  // Scalar: 32 threads along m (pixels tm + 32j), kThreads/32 along k. Vector: BM/4 threads along
  // m (pixels 4·tm .. 4·tm+3), the rest along k.
  constexpr int kMJ = BM / 32, kTK = kThreads / 32, kKJ = BK / kTK;
  constexpr int kTMv = BM / 4, kTKv = kThreads / kTMv, kKJv = BK / kTKv;
  // Per pixel: its image's base, the offset of its window's corner (may be negative), and which of
  // the R·S ≤ 64 window positions lie inside the image (so a copy tests one bit, not two bounds).
  const float* a_base[kMJ];
  int pix_off[kMJ];
  unsigned long long inside[kMJ];
  const int tm = vec_a ? t % kTMv : t % 32;
  const int tk = vec_a ? t / kTMv : t / 32;
#pragma unroll
  for (int j = 0; j < kMJ; ++j) {
    const int m = vec_a ? m0 + 4 * tm : m0 + tm + 32 * j;
    const bool ok = m < g.m_total;
    const int image = ok ? m / g.ohw : 0;
    const int pix = ok ? m - image * g.ohw : 0;
    const int oy = pix / p.ow, ox = pix - oy * p.ow;
    a_base[j] = xg + static_cast<long long>(image) * p.c * hw + (vec_a ? pix : 0);
    const int iy0 = oy * p.stride_h - p.pad_h, ix0 = ox * p.stride_w - p.pad_w;
    pix_off[j] = iy0 * p.w + ix0;
    // Columns inside the image, then that row of bits at each row inside: R + S steps, not R·S
    // (a 7×7 stem's 49-step test per pixel cost more than its copies).
    unsigned long long cols = 0, bits = 0;
    for (int c = 0; c < p.s; ++c) {
      if (static_cast<unsigned>(ix0 + c * p.dil_w) < static_cast<unsigned>(p.w)) cols |= 1ULL << c;
    }
    for (int r = 0; r < p.r; ++r) {
      if (static_cast<unsigned>(iy0 + r * p.dil_h) < static_cast<unsigned>(p.h)) bits |= cols << (r * p.s);
    }
    inside[j] = ok ? bits : 0ULL;
  }
  const int plane = p.h * p.w;  // < 2^31 per image (conv_uses_tensor_cores)

  // k → (c, r, s) by float reciprocals: exact while k < 2^20 (the quotient's error stays below the
  // 0.5 / rs margin that (k + 0.5) keeps from the next integer), about 20 instructions fewer per
  // division than integer division; larger K falls back to integer division.
  const bool fast_div = g.kdim < (1 << 20);
  const float inv_rs = 1.f / static_cast<float>(g.rs), inv_s = 1.f / static_cast<float>(p.s);

  auto load_a = [&](int stage, int k0) {
    float* as = as_all + stage * kAStage;
    if (vec_a) {
      const bool m_ok = (inside[0] & 1) != 0;
#pragma unroll
      for (int i = 0; i < kKJv; ++i) {
        const int kk = tk + kTKv * i, k = k0 + kk;
        const bool ok = m_ok && k < kr.k_end;
        cp_async16(as + kk * LDA + 4 * tm, a_base[0] + (ok ? k * plane : 0), ok);
      }
    } else {
#pragma unroll
      for (int i = 0; i < kKJ; ++i) {
        const int kk = tk + kTK * i, k = k0 + kk;
        const bool k_ok = k < kr.k_end;
        const int c = fast_div ? static_cast<int>((static_cast<float>(k) + 0.5f) * inv_rs) : k / g.rs;
        const int rem = k - c * g.rs;
        const int r = fast_div ? static_cast<int>((static_cast<float>(rem) + 0.5f) * inv_s) : rem / p.s;
        const int row_off = c * plane + r * p.dil_h * p.w + (rem - r * p.s) * p.dil_w;
#pragma unroll
        for (int j = 0; j < kMJ; ++j) {
          const bool ok = k_ok && ((inside[j] >> rem) & 1ULL) != 0;
          // An invalid copy reads nothing (src-size 0) but still gets an address inside x.
          cp_async4(as + kk * LDA + tm + 32 * j, a_base[j] + (ok ? pix_off[j] + row_off : 0), ok);
        }
      }
    }
  };
  auto load_b = [&](int stage, int k0) {
    float* bs = bs_all + stage * kBStage;
    if (vec_b) {
#pragma unroll
      for (int i = 0; i < BN * BK / 4 / kThreads; ++i) {
        const int idx = t + kThreads * i;
        const int n = idx / (BK / 4), kk = (idx % (BK / 4)) * 4, k = k0 + kk;
        const bool ok = n0 + n < g.kg && k < kr.k_end;
        cp_async16(bs + n * LDB + kk, ok ? wg + static_cast<long long>(n0 + n) * g.kdim + k : w, ok);
      }
    } else {
#pragma unroll 8
      for (int i = 0; i < BN * BK / kThreads; ++i) {
        const int idx = t + kThreads * i;
        const int n = idx / BK, kk = idx % BK, k = k0 + kk;
        const bool ok = n0 + n < g.kg && k < kr.k_end;
        cp_async4(bs + n * LDB + kk, ok ? wg + static_cast<long long>(n0 + n) * g.kdim + k : w, ok);
      }
    }
  };

  float acc[Tile::kMI][Tile::kNI][4];
#pragma unroll
  for (int i = 0; i < Tile::kMI; ++i)
#pragma unroll
    for (int j = 0; j < Tile::kNI; ++j)
#pragma unroll
      for (int v = 0; v < 4; ++v) acc[i][j][v] = 0.f;

  const int wm0 = (warp % Tile::kWarpsM) * WM, wn0 = (warp / Tile::kWarpsM) * WN;
  const int ktiles = (kr.k_end - kr.k_begin + BK - 1) / BK;
  // Programmatic launch (pdl.cuh): constant weights of the first stages are copied while the
  // previous kernel finishes; x, which it may still be writing, only after pdl_wait(). The early
  // copies join the first commit group, so the waits below count the same groups either way.
  const bool early_b = (flags & kConstW) != 0;
  if (early_b) {
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < ktiles) load_b(s, kr.k_begin + s * BK);
    }
  }
  pdl_wait();
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < ktiles) {
      load_a(s, kr.k_begin + s * BK);
      if (!early_b) load_b(s, kr.k_begin + s * BK);
    }
    cp_async_commit();  // empty groups keep the count the wait below relies on
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<kStages - 2>();  // tile kt has landed (this thread's copies) ...
    __syncthreads();               // ... everyone's, and everyone is done with tile kt − 1's stage
    if (kt + kStages - 1 < ktiles) {
      load_a((kt + kStages - 1) % kStages, kr.k_begin + (kt + kStages - 1) * BK);
      load_b((kt + kStages - 1) % kStages, kr.k_begin + (kt + kStages - 1) * BK);
    }
    cp_async_commit();
    const float* as = as_all + (kt % kStages) * kAStage;
    const float* bs = bs_all + (kt % kStages) * kBStage;
#pragma unroll
    for (int kk = 0; kk < BK; kk += Op::kK) {
      uint32_t af[Tile::kMI][4], bf[Tile::kNI][2];
#pragma unroll
      for (int i = 0; i < Tile::kMI; ++i) Op::load_a(af[i], as, LDA, kk, wm0 + 16 * i, lane);
#pragma unroll
      for (int j = 0; j < Tile::kNI; ++j) Op::load_b(bf[j], bs, LDB, kk, wn0 + 8 * j, lane);
#pragma unroll
      for (int i = 0; i < Tile::kMI; ++i)
#pragma unroll
        for (int j = 0; j < Tile::kNI; ++j) Op::mma(acc[i][j], af[i], bf[j]);
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the pipeline's memory becomes the [n][m] output tile
  pdl_launch_dependents();  // only the epilogue is left: the next kernel may start arriving

  // c0 c1: (m g, n 2t, 2t+1); c2 c3: (m g+8, same n). [n][m] with stride ≡ 4 mod 32: banks 8t + g.
  float* cs = smem;
  {
    const int gq = lane >> 2, tq = lane & 3;
#pragma unroll
    for (int i = 0; i < Tile::kMI; ++i)
#pragma unroll
      for (int j = 0; j < Tile::kNI; ++j) {
        const int mm = wm0 + 16 * i + gq, nn = wn0 + 8 * j + 2 * tq;
        cs[nn * LDC + mm] = acc[i][j][0];
        cs[(nn + 1) * LDC + mm] = acc[i][j][1];
        cs[nn * LDC + mm + 8] = acc[i][j][2];
        cs[(nn + 1) * LDC + mm + 8] = acc[i][j][3];
      }
  }
  __syncthreads();
  // An empty split (more splits than K tiles) still writes its zeros: the reduction reads every
  // split. With kVecC (OH·OW % 4 == 0) a thread owns 4 adjacent pixels of one image and moves
  // float4s; else one pixel column. Either way the pixel is decoded once, then channels walked.
  const int n_end = min(BN, g.kg - n0);
  const int oc0 = kr.grp * g.kg + n0;
  const bool vec_c = (flags & kVecC) != 0;
  static_assert(kThreads % BM == 0, "a thread keeps its pixel column through the epilogue");
  constexpr int kQ = BM / 4;
  const int mm = vec_c ? 4 * (t % kQ) : t % BM, m = m0 + mm;
  const int nn0 = vec_c ? t / kQ : t / BM, nn_step = vec_c ? kThreads / kQ : kThreads / BM;
  const bool m_ok = m < g.m_total;
  const int image = m_ok ? m / g.ohw : 0, pix = m_ok ? m - image * g.ohw : 0;
  const long long at = (static_cast<long long>(image) * p.k + oc0) * g.ohw + pix;
  // y = act(sum + bias + residual) for channel nn of the tile (4 pixels with kVecC).
  auto store4 = [&](int nn, float4 v) {
    const long long idx = at + static_cast<long long>(nn) * g.ohw;
    if (e.bias != nullptr) {
      const float b = __ldg(e.bias + oc0 + nn);
      v.x += b, v.y += b, v.z += b, v.w += b;
    }
    if (e.residual != nullptr) {
      const float4 r = __ldg(reinterpret_cast<const float4*>(e.residual + idx));
      v.x += r.x, v.y += r.y, v.z += r.z, v.w += r.w;
    }
    v.x = activate(v.x, e.act, e.alpha, e.beta);
    v.y = activate(v.y, e.act, e.alpha, e.beta);
    v.z = activate(v.z, e.act, e.alpha, e.beta);
    v.w = activate(v.w, e.act, e.alpha, e.beta);
    *reinterpret_cast<float4*>(y + idx) = v;
  };
  auto store1 = [&](int nn, float v) {
    const long long idx = at + static_cast<long long>(nn) * g.ohw;
    if (e.bias != nullptr) v += __ldg(e.bias + oc0 + nn);
    if (e.residual != nullptr) v += __ldg(e.residual + idx);
    y[idx] = activate(v, e.act, e.alpha, e.beta);
  };
  if (partial == nullptr) {
    if (!m_ok) return;
    for (int nn = nn0; nn < n_end; nn += nn_step) {
      if (vec_c) {
        store4(nn, *reinterpret_cast<const float4*>(cs + nn * LDC + mm));
      } else {
        store1(nn, cs[nn * LDC + mm]);
      }
    }
    return;
  }
  // Split-K: this split's sums of the tile, [split][group][n][m] (m fastest).
  const long long split_elems = static_cast<long long>(p.k) * g.m_total;
  float* const tile_part = partial + (static_cast<long long>(kr.grp) * g.kg + n0) * g.m_total + m;
  if (m_ok) {
    float* dst = tile_part + kr.split * split_elems;
    for (int nn = nn0; nn < n_end; nn += nn_step) {
      if (vec_c) {
        *reinterpret_cast<float4*>(dst + static_cast<long long>(nn) * g.m_total) =
            *reinterpret_cast<const float4*>(cs + nn * LDC + mm);
      } else {
        dst[static_cast<long long>(nn) * g.m_total] = cs[nn * LDC + mm];
      }
    }
  }
  if (counters < 0) return;  // splitk_reduce adds the splits
  // In-kernel reduction: the last block of the tile to arrive (a counter per tile, g_tile_counters)
  // adds every split's sums in split order, as splitk_reduce does (the same bits whichever block
  // is last), runs the epilogue, and sets the counter back to zero for the next launch.
  // The flag lives in the pipeline's shared memory (free once every thread has copied its part
  // of the tile out): static shared memory would cost some tiles a block per multiprocessor.
  int* const last_arrival = reinterpret_cast<int*>(smem);
  __threadfence();  // this block's sums are visible device-wide before its arrival is counted
  __syncthreads();
  const int splits = static_cast<int>(gridDim.z) / p.groups;
  if (t == 0) {
    unsigned* counter = g_tile_counters + counters + (kr.grp * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    const unsigned before = atomicAdd(counter, 1u);
    *last_arrival = before == static_cast<unsigned>(splits - 1) ? 1 : 0;
    if (*last_arrival != 0) *counter = 0u;  // every split has arrived; none touches it again
  }
  __syncthreads();
  if (*last_arrival == 0 || !m_ok) return;
  __threadfence();  // the other splits' sums, published before their arrivals
  // One block adds the whole tile: up to kBatch splits' loads are issued before the first add, so
  // the L2 round trips overlap (one after another they made this slower than a second kernel).
  constexpr int kBatch = 16;
  for (int nn = nn0; nn < n_end; nn += nn_step) {
    const float* src = tile_part + static_cast<long long>(nn) * g.m_total;
    if (vec_c) {
      float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
      for (int s0 = 0; s0 < splits; s0 += kBatch) {
        float4 v[kBatch];
#pragma unroll
        for (int i = 0; i < kBatch; ++i) {
          if (s0 + i < splits) v[i] = __ldcg(reinterpret_cast<const float4*>(src + (s0 + i) * split_elems));
        }
#pragma unroll
        for (int i = 0; i < kBatch; ++i) {
          if (s0 + i < splits) sum.x += v[i].x, sum.y += v[i].y, sum.z += v[i].z, sum.w += v[i].w;
        }
      }
      store4(nn, sum);
    } else {
      float sum = 0.f;
      for (int s0 = 0; s0 < splits; s0 += kBatch) {
        float v[kBatch];
#pragma unroll
        for (int i = 0; i < kBatch; ++i) {
          if (s0 + i < splits) v[i] = __ldcg(src + (s0 + i) * split_elems);
        }
#pragma unroll
        for (int i = 0; i < kBatch; ++i) {
          if (s0 + i < splits) sum += v[i];
        }
      }
      store1(nn, sum);
    }
  }
}

}  // namespace redwood::cuda::kernels::conv
