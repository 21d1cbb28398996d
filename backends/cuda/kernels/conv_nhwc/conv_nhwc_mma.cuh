#pragma once
// Implicit-GEMM convolution on NHWC activations (rw.ConvNhwc; docs/cuda.md, Kernels, the
// rw.ConvNhwc row): tensor cores (mma.sync, fp32 accumulation) fed from a 3- or 4-stage cp.async
// pipeline of 16-byte copies. Storage fp16/bf16: mma m16n8k16 on the stored values. Storage fp32
// (precision tf32): mma m16n8k8 tf32 on operands rounded to tf32 (cvt.rna, as the NCHW tf32
// path), everything else fp32.
//
//   M = N·OH·OW output pixels, N-dim = K output channels, K-dim = R·S·C with k = (r·S + s)·C + c.
//   A[m][k] = x[image, oy·sh − ph + r·dh, ox·sw − pw + s·dw, c]   (zero outside the image)
//   B[n][k] = w[n, r, s, c]: the weights [K, R, S, C] are already the rows of B.
//
// Both operands are contiguous along C and C is a multiple of a 16-byte chunk's channels (E: 8 of
// a 16-bit type, 4 of fp32), so a chunk never straddles a window position: every copy is one
// cp.async of 16 bytes (src-size 0 fills zeros for padding, edges and the K-dim tail). Shared
// memory holds each stage's A as [BM][BK] and B as [BN][BK] (rows of 4 or 8 chunks: BK = 32 or 64
// 16-bit elements, 16 or 32 floats), each row's chunks XOR-swizzled (swz below): the 8 rows an
// ldmatrix phase reads then cover all 32 banks, and the copies stay whole 16-byte chunks.
// Fragments come from ldmatrix.x4 (A: one m16k16 fragment; B: two n8k16 fragments, since B is
// stored [n][k], the .col operand's layout). One mma k-step is two chunks either way.
//
// fp32 through ldmatrix (which moves 8×8 matrices of b16): a row of 8 b16 is 4 fp32, and lane l
// receives the 32 bits at b16 (l/4, 2·(l%4)), i.e. fp32 element [l/4][l%4] of an 8-row × 4-float
// block. The tf32 m16n8k8 fragments want exactly that (g = l/4, t = l%4): a0 = A[g][t],
// a1 = A[g+8][t], a2 = A[g][t+4], a3 = A[g+8][t+4]; b0 = B[k=t][n=g], b1 = B[k=t+4][n=g], and B is
// stored [n][k]. So the same x4 addressing serves both: matrix 0 = rows 0-7 of chunk 2·ks, matrix
// 1 = rows 8-15 of it, matrices 2 and 3 the next chunk (A); for B, rows n 0-7 of chunks 2·ks and
// 2·ks+1, then rows n 8-15 (the next n8 fragment). Each fp32 register is rounded to tf32 where the
// mma uses it (mma_step).
//
// The loader (ConvLoader), the block's tile and K-dim range (ConvBlock) and the epilogue
// (conv_epilogue) are conv_nhwc_common.cuh's, shared with the wgmma kernel. Epilogue: the
// accumulators are staged through shared memory as fp32 [BM][BN + 4]; each thread then takes 8
// adjacent output channels of one pixel: + bias (fp32), + residual (8 values of S), activation
// (kernels::activate, the Conv's codes), rounded to S once and stored (nhwc_vec.cuh: 16 bytes of
// a 16-bit type, 32 of fp32).
//
// Split-K (small M, e.g. batch 1 on 7×7 outputs): blockIdx.y is the split; each split writes its
// fp32 tile to the workspace, and the last block of a tile to arrive (a counter per tile, which
// launch_conv_nhwc zeroes before the kernel and the last block resets) adds the splits in the
// fixed order 0, 1, … and runs the epilogue, so results do not depend on arrival order.
//
// Programmatic dependent launch (pdl.cuh): the weight tiles of the first stages are copied before
// pdl_wait(); activations, the residual and every global write come after it.
//
// T is the storage type (half, __nv_bfloat16 or float), with its mma in MmaOf<T>: Mma16<T> for
// the 16-bit types, MmaTf32 for float; or Op = MmaTf32x3 for float at precision fp32 (three tf32
// products of split operands, fp32-accurate). The geometry, pipeline (in bytes), split-K and
// epilogue math are the same for all.

#include "backends/cuda/kernels/conv_nhwc/conv_nhwc_common.cuh"
#include "backends/cuda/kernels/mma_ops.cuh"
#include "backends/cuda/kernels/pdl.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace redwood::cuda::kernels::nhwc {

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}

/// Per storage type: the mma and conversions of pairs to and from fp32 (mma_ops.cuh).
template <typename T> struct Mma16 {
  static constexpr int kElems = 8;  // per 16-byte chunk
  static constexpr bool kSplit = false, kRound = false;
  // An operand register as ldmatrix left it is already the mma's operand.
  static __device__ __forceinline__ uint32_t operand(uint32_t r) { return r; }
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    mma_m16n8k16<T>(d, a, b0, b1);
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) { return pack2<T>(lo, hi); }
  static __device__ __forceinline__ float2 unpack(uint32_t v) { return unpack2<T>(v); }
};

/// fp32 storage: each register holds one fp32 value, rounded to tf32 (to nearest, ties away:
/// cvt.rna, as the NCHW tf32 path) before the m16n8k8 tf32 mma.
struct MmaTf32 {
  static constexpr int kElems = 4;  // per 16-byte chunk
  static constexpr bool kSplit = false, kRound = true;
  static __device__ __forceinline__ uint32_t operand(uint32_t r) { return to_tf32(__uint_as_float(r)); }
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    mma_m16n8k8_tf32(d, a, b0, b1);
  }
};

template <typename T> using MmaOf = std::conditional_t<std::is_same_v<T, float>, MmaTf32, Mma16<T>>;

/// fp32 storage at precision fp32 ("3xTF32"): each operand x is split into big = tf32(x) and
/// small = tf32(x − big) (x − big is exact in fp32), and acc += small·big + big·small + big·big,
/// three m16n8k8 tf32 products; the dropped small·small term and small's rounding are below
/// 2^-21 of the product, so the sum is as accurate as fp32 FMAs (not bit-identical to them).
/// The fragments stay raw fp32 in registers; mma_step splits them once per k-step.
struct MmaTf32x3 {
  static constexpr int kElems = 4;
  static constexpr bool kSplit = true, kRound = false;
  static __device__ __forceinline__ uint32_t operand(uint32_t r) { return r; }
  static __device__ __forceinline__ void split(uint32_t r, uint32_t& big, uint32_t& small) {
    const float x = __uint_as_float(r);
    big = to_tf32(x);
    small = to_tf32(x - __uint_as_float(big));
  }
  static __device__ __forceinline__ void mma3(float (&d)[4], const uint32_t (&ab)[4], const uint32_t (&as)[4],
                                              const uint32_t (&bb)[2], const uint32_t (&bs)[2]) {
    mma_m16n8k8_tf32(d, as, bb[0], bb[1]);  // the small terms first, the big product last
    mma_m16n8k8_tf32(d, ab, bs[0], bs[1]);
    mma_m16n8k8_tf32(d, ab, bb[0], bb[1]);
  }
};

/// Block tile BM × BN, warp tile WM × WN, BK 16-bit elements of K-dim a stage (32 or 64: rows of
/// 4 or 8 chunks of 16 bytes; with fp32 storage the same rows hold BK / 2 floats), kStages stages.
/// Everything here is in bytes or chunks, so one Tile serves every storage type.
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

// Op: the products (MmaOf<T>, or MmaTf32x3 for fp32 storage at precision fp32).
// SC: the projection shortcut's instantiation (ConvLoader's SC; a.x2 set).
template <typename T, int BM, int BN, int WM, int WN, int BK_, int STAGES, bool DB, typename Op = MmaOf<T>,
          bool SC = false>
__global__ void __launch_bounds__(Tile<BM, BN, WM, WN, BK_, STAGES, DB>::kThreads,
                                  Tile<BM, BN, WM, WN, BK_, STAGES, DB>::kMinBlocks)
    conv_nhwc_mma(ConvArgs<T> a) {
  using Tl = Tile<BM, BN, WM, WN, BK_, STAGES, DB>;
  // BK: elements of T a stage row (Tl::kBK 16-bit elements are BK_ / 2 floats).
  constexpr int E = Op::kElems, BK = Tl::kChunks * E, kStages = Tl::kStages, kThreads = Tl::kThreads;
  static_assert(Tl::kBK == BK_ && BK * static_cast<int>(sizeof(T)) == BK_ * 2);
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* const as_all = reinterpret_cast<T*>(smem_raw);
  T* const bs_all = as_all + kStages * BM * BK;

  const ConvBlock<BM, BN, BK> blk(a);  // this block's output tile and K-dim range (conv_nhwc_common.cuh)
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;

  // ---- copies (conv_nhwc_common.cuh): thread t copies chunk t % kCpr of the same rows every k tile.
  constexpr int kCpr = Tl::kChunks;
  ConvLoader<T, kCpr, BM, BN, kThreads, SC> ld(a, blk.m0, blk.n0, blk.k_begin, blk.k_end, t);
  static_assert(decltype(ld)::E == E && decltype(ld)::BK == BK);
  auto load_b = [&](int stage, int k0) { ld.load_b(bs_all + stage * BN * BK, k0); };
  auto load_a = [&](int stage) { ld.load_a(as_all + stage * BM * BK); };

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
    if (s < blk.ktiles) load_b(s, blk.k_begin + s * BK);
  }
  pdl_wait();
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < blk.ktiles) load_a(s);
    cp_async_commit();  // empty groups keep the count the waits rely on
  }

  // With DB, fragments are double-buffered: a k-step's ldmatrix is issued before the previous
  // k-step's mma (the asm statements keep their order, so the source order is the schedule), and
  // the next tile's first fragments are read before this tile's last mma. Without (tiles whose
  // registers are short), each k-step reads its fragments and then multiplies.
  const int wm0 = (warp % Tl::kWarpsM) * WM, wn0 = (warp / Tl::kWarpsM) * WN;
  constexpr int KS = kCpr / 2, kBufs = DB ? 2 : 1;  // an mma k-step is two chunks
  uint32_t af[kBufs][Tl::kMI][4], bf[kBufs][Tl::kNI][2];
  auto load_frags = [&](int buf, int stage, int ks) {
    const T* as = as_all + stage * BM * BK;
    const T* bs = bs_all + stage * BN * BK;
#pragma unroll
    for (int i = 0; i < Tl::kMI; ++i) {
      ldmatrix_x4(af[buf][i], as + swz_chunk<kCpr, E>(wm0 + 16 * i + (lane & 15), 2 * ks + (lane >> 4)));
    }
#pragma unroll
    for (int j = 0; j < Tl::kNI; j += 2) {
      uint32_t r[4];
      ldmatrix_x4(r, bs + swz_chunk<kCpr, E>(wn0 + 8 * j + (lane & 7) + ((lane >> 4) << 3),
                                             2 * ks + ((lane >> 3) & 1)));
      bf[buf][j][0] = r[0];
      bf[buf][j][1] = r[1];
      bf[buf][j + 1][0] = r[2];
      bf[buf][j + 1][1] = r[3];
    }
  };
  auto mma_step = [&](int buf) {
    if constexpr (Op::kSplit) {
      // B's big and small parts once a k-step, A's once per row of warp tiles.
      uint32_t bb[Tl::kNI][2], bs[Tl::kNI][2];
#pragma unroll
      for (int j = 0; j < Tl::kNI; ++j)
#pragma unroll
        for (int q = 0; q < 2; ++q) Op::split(bf[buf][j][q], bb[j][q], bs[j][q]);
#pragma unroll
      for (int i = 0; i < Tl::kMI; ++i) {
        uint32_t ab[4], as[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) Op::split(af[buf][i][q], ab[q], as[q]);
#pragma unroll
        for (int j = 0; j < Tl::kNI; ++j) Op::mma3(acc[i][j], ab, as, bb[j], bs[j]);
      }
    } else if constexpr (Op::kRound) {
      // Rounded to tf32 where they are used (the fragments' loads stay in flight until then): B
      // once a k-step, A once per row of warp tiles.
      uint32_t bt[Tl::kNI][2];
#pragma unroll
      for (int j = 0; j < Tl::kNI; ++j)
#pragma unroll
        for (int q = 0; q < 2; ++q) bt[j][q] = Op::operand(bf[buf][j][q]);
#pragma unroll
      for (int i = 0; i < Tl::kMI; ++i) {
        uint32_t at[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) at[q] = Op::operand(af[buf][i][q]);
#pragma unroll
        for (int j = 0; j < Tl::kNI; ++j) Op::mma(acc[i][j], at, bt[j][0], bt[j][1]);
      }
    } else {
#pragma unroll
      for (int i = 0; i < Tl::kMI; ++i)
#pragma unroll
        for (int j = 0; j < Tl::kNI; ++j) Op::mma(acc[i][j], af[buf][i], bf[buf][j][0], bf[buf][j][1]);
    }
  };
  // The copies of tile kt + kStages − 1 (if there is one) into its stage, as one commit group
  // (empty past the end: the waits count groups).
  auto copy_ahead = [&](int kt) {
    const int next = kt + kStages - 1;
    if (next < blk.ktiles) {
      load_b(next % kStages, blk.k_begin + next * BK);
      load_a(next % kStages);
    }
    cp_async_commit();
  };
  if constexpr (DB) {
    cp_async_wait<kStages - 2>();  // tile 0 has landed (this thread's copies) ...
    __syncthreads();               // ... everyone's
    if (blk.ktiles > 0) load_frags(0, 0, 0);
    for (int kt = 0; kt < blk.ktiles; ++kt) {
      // Tile kt + kStages − 1 goes to the stage of tile kt − 1, which every warp finished reading
      // before the barrier that made tile kt visible.
      copy_ahead(kt);
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        if (ks == KS - 1) {
          cp_async_wait<kStages - 2>();  // tile kt + 1 has landed ...
          __syncthreads();               // ... everyone's, and nobody reads tile kt's stage any more
          if (kt + 1 < blk.ktiles) load_frags((ks + 1) & 1, (kt + 1) % kStages, 0);
        } else {
          load_frags((ks + 1) & 1, kt % kStages, ks + 1);
        }
        mma_step(ks & 1);
      }
    }
  } else {
    for (int kt = 0; kt < blk.ktiles; ++kt) {
      cp_async_wait<kStages - 2>();  // tile kt has landed (this thread's copies) ...
      __syncthreads();               // ... everyone's, and everyone is done with tile kt − 1's stage
      copy_ahead(kt);
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

  conv_epilogue<T, BM, BN, LDC, kThreads>(a, cs, blk.m0, blk.n0, blk.tile_id, blk.split, blk.splits, t);
}

}  // namespace redwood::cuda::kernels::nhwc
