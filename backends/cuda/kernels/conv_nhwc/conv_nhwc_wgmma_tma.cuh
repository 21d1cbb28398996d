#pragma once
// rw.ConvNhwc's wgmma kernel fed by the Tensor Memory Accelerator (sm_90a; docs/cuda.md,
// Kernels). The wgmma kernel (conv_nhwc_wgmma.cuh, read that first) has every thread compute
// the implicit im2col's addresses, bounds and cp.async of every K tile; profiled on the H200,
// its 3×3 layers issue an instruction on 59 % of cycles and run at 185–250 TFLOP/s, a third of
// the tensor cores' rate. Here one thread asks the TMA for each stage: the activations through an
// im2col tensor map (one copy brings BM output pixels' 128 bytes of channels at filter tap
// (r, s), zeros where the window leaves the image or M ends), the weights through a tiled one
// (BN rows × 128 bytes of K-dim). Both land 128-byte swizzled, the layout the wgmma descriptors
// read (make_desc), and complete on the stage's mbarrier. Multiplication and the epilogue are the
// wgmma kernel's.
//
// Two schedules (WS):
// - without: thread 0 issues the copies inside the loop that every thread runs, and a stage is
//   reused after the loop's barrier, as in the wgmma kernel (tile kt − 2's products are done
//   everywhere by the barrier of iteration kt);
// - with (warp-specialized): one more warp, the producer, issues every copy as soon as the stage is
//   free; each consumer warp frees a stage by an arrival on its `empty` mbarrier once its products
//   of that tile are done (wgmma.wait_group 1 after the next tile's), so the warpgroups never
//   wait for each other inside the loop. The producer then joins the epilogue.
//
// What fits (conv_nhwc_tma_fits, conv_nhwc_wgmma_tma.cu): C a multiple of a stage row's elements
// (64 16-bit, 32 fp32), so a K tile is one filter tap's run of channels; no shortcut input;
// square stride, padding, dilation and filter (the im2col box corners are given per spatial
// dimension, and one order serves both then); padding and the box corners within the TMA's
// ±127.

#include "backends/cuda/kernels/conv_nhwc/conv_nhwc_wgmma.cuh"
#include "backends/cuda/kernels/mbarrier.cuh"

#include <cuda.h>  // CUtensorMap

namespace redwood::cuda::kernels::nhwc {

/// The im2col copy of one stage: pixelsPerColumn pixels from (c, w, h, n), each at filter offset
/// (off_w, off_h), into `dst` (shared), completing on `bar`.
__device__ __forceinline__ void tma_load_im2col(std::uint32_t dst, const CUtensorMap* map, int c, int w, int h, int n,
                                                std::uint16_t off_w, std::uint16_t off_h, std::uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
      "%5}], [%6], {%7, %8};\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(c), "r"(w), "r"(h), "r"(n), "r"(bar), "h"(off_w), "h"(off_h)
      : "memory");
}

/// The tiled copy of a box at (x, y) (x the inner dimension) into `dst`, completing on `bar`.
__device__ __forceinline__ void tma_load_2d(std::uint32_t dst, const CUtensorMap* map, int x, int y,
                                            std::uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
      "[%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(x), "r"(y), "r"(bar)
      : "memory");
}

/// The shared memory of a TMA tile: the wgmma tile's, and two mbarriers a stage after it (full:
/// the copies landed; empty: the consumers are done with it, WS only); WS adds a producer warp.
template <int BM, int BN, int WGS, int STAGES, bool WS> struct TmaTile : WgTile<BM, BN, WGS, STAGES> {
  using Base = WgTile<BM, BN, WGS, STAGES>;
  static constexpr int kConsumers = Base::kThreads, kThreads = kConsumers + (WS ? 32 : 0);
  static constexpr int kBarOffset = Base::kDataBytes;
  static constexpr int kSmemBytes = kBarOffset + STAGES * 16 + 1024;
  static_assert(kSmemBytes <= 227 * 1024, "shared memory of one multiprocessor");
};

/// x: the im2col map of the activations [N, H, W, C]; w: the tiled map of the weights [K][K-dim].
template <typename T, int BM, int BN, int WGS, int STAGES, bool WS>
__global__ void __launch_bounds__(TmaTile<BM, BN, WGS, STAGES, WS>::kThreads, 1)
    conv_nhwc_wgmma_tma(const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap w_map,
                        ConvArgs<T> a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Tl = TmaTile<BM, BN, WGS, STAGES, WS>;
  constexpr int BK = 128 / static_cast<int>(sizeof(T)), kStages = STAGES, kThreads = Tl::kThreads;
  constexpr int kAhead = kStages - 2;  // as the wgmma kernel: one stage multiplied, one maybe still read
  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* const smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  const std::uint32_t a_base = smem_u32(smem), b_base = a_base + kStages * Tl::kStageABytes;
  const std::uint32_t full0 = smem_u32(smem + Tl::kBarOffset), empty0 = full0 + 8 * kStages;

  const ConvBlock<BM, BN, BK> blk(a);
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
  if (t == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full0 + 8 * s, 1);                   // the issuing thread's arrival + the bytes
      mbar_init(empty0 + 8 * s, Tl::kConsumers / 32);  // WS: each consumer warp, done with the stage
    }
    mbar_init_fence();
  }
  __syncthreads();

  // The tile's first output pixel and the input position of its window's corner: the im2col
  // copies walk BM pixels on from there (W, then H, then N) inside the map's box.
  const ConvShape& p = a.p;
  const int ohw = p.oh * p.ow, img = blk.m0 / ohw, pix = blk.m0 - img * ohw, oy = pix / p.ow, ox = pix - oy * p.ow;
  const int w0 = ox * p.stride_w - p.pad_w, h0 = oy * p.stride_h - p.pad_h;
  auto issue = [&](int kt) {  // one thread: tile kt's copies into its stage
    const int stage = kt % kStages, k0 = blk.k_begin + kt * BK;
    const int rs = k0 / p.c, c0 = k0 - rs * p.c, r = rs / p.s, s = rs - r * p.s;
    const std::uint32_t bar = full0 + 8 * stage;
    mbar_arrive_expect_tx(bar, (BM + BN) * 128);  // whole boxes, zero-filled parts included
    tma_load_im2col(a_base + stage * Tl::kStageABytes, &x_map, c0, w0, h0, img,
                    static_cast<std::uint16_t>(s * p.dil_w), static_cast<std::uint16_t>(r * p.dil_h), bar);
    tma_load_2d(b_base + stage * Tl::kStageBBytes, &w_map, k0, blk.n0, bar);
  };

  float acc[Tl::kMI][Tl::kAcc];
#pragma unroll
  for (int i = 0; i < Tl::kMI; ++i)
#pragma unroll
    for (int v = 0; v < Tl::kAcc; ++v) acc[i][v] = 0.f;

  pdl_wait();  // the activations come from the previous kernel
  const int wg = warp / 4;
  const std::uint32_t a_wg = a_base + wg * Tl::kWgRows * 128;
  if constexpr (WS) {
    if (t >= Tl::kConsumers) {  // the producer warp: lane 0 issues, stage by stage as they free up
      if (lane == 0) {
        for (int kt = 0; kt < blk.ktiles; ++kt) {
          if (kt >= kStages) mbar_wait(empty0 + 8 * (kt % kStages), static_cast<std::uint32_t>((kt / kStages - 1) & 1));
          issue(kt);
        }
      }
      __syncwarp();
    } else {
      for (int kt = 0; kt < blk.ktiles; ++kt) {
        const int stage = kt % kStages;
        mbar_wait(full0 + 8 * stage, static_cast<std::uint32_t>((kt / kStages) & 1));
        wgmma_k_tile<T, BN>(acc, a_wg + stage * Tl::kStageABytes, b_base + stage * Tl::kStageBBytes);
        // Tile kt − 1's products are done (wait_group 1): its stage is free as far as this warp goes.
        __syncwarp();
        if (kt > 0 && lane == 0) mbar_arrive(empty0 + 8 * ((kt - 1) % kStages));
      }
      wgmma_wait<0>();
      fence_accumulators(acc);
    }
  } else {
    if (t == 0) {
      for (int kt = 0; kt < kAhead && kt < blk.ktiles; ++kt) issue(kt);
    }
    for (int kt = 0; kt < blk.ktiles; ++kt) {
      const int stage = kt % kStages;
      mbar_wait(full0 + 8 * stage, static_cast<std::uint32_t>((kt / kStages) & 1));  // tile kt has landed
      __syncthreads();  // and tile kt − 2's wgmmas are done everywhere: its stage takes tile kt + kAhead
      if (t == 0 && kt + kAhead < blk.ktiles) issue(kt + kAhead);
      wgmma_k_tile<T, BN>(acc, a_wg + stage * Tl::kStageABytes, b_base + stage * Tl::kStageBBytes);
    }
    wgmma_wait<0>();
    fence_accumulators(acc);
  }
  __syncthreads();  // every issued copy was waited for: the pipeline's memory becomes the output tile
  pdl_launch_dependents();

  float* const cs = reinterpret_cast<float*>(smem);
  constexpr int LDC = Tl::kLDC;
  if (t < Tl::kConsumers) stage_accumulators<BN, Tl::kWgRows, LDC>(acc, cs, wg, warp, lane);
  __syncthreads();
  if (WS && blk.splits == 1) {
    // The consumers alone: 256 threads divide the tile's rows evenly (conv_epilogue's batched
    // path), 288 do not; a single split has no barrier in the epilogue to wait for the producer.
    if (t < Tl::kConsumers) {
      conv_epilogue<T, BM, BN, LDC, Tl::kConsumers>(a, cs, blk.m0, blk.n0, blk.tile_id, 0, 1, t);
    }
  } else {
    conv_epilogue<T, BM, BN, LDC, kThreads>(a, cs, blk.m0, blk.n0, blk.tile_id, blk.split, blk.splits, t);
  }
#else
  __trap();  // built for another architecture: never launched (offered only on sm_90a)
#endif
}

}  // namespace redwood::cuda::kernels::nhwc
