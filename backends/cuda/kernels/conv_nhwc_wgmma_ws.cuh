#pragma once
// rw.ConvNhwc's warp-specialized, persistent wgmma kernel (sm_90a; docs/cuda.md, Kernels,
// rw.ConvNhwc's families). The same implicit GEMM, operand
// layout (stage rows of 128 bytes with the 128-byte swizzle, read by wgmma through descriptors),
// loader and epilogue math as conv_nhwc_wgmma.cuh (read that first); what differs is who does
// what and when. (Slower than conv_nhwc_wgmma.cuh's tiles on every ResNet-50 layer measured, so
// they are offered only with REDWOOD_CUDA_WGMMA_WS=1; docs/results/2026-11-30-h200-kernels.md.)
//
//   * 384 threads: warpgroup 0 is the producer, warpgroups 1 and 2 the consumers. setmaxnreg
//     moves registers from the producer to the consumers, which alone hold accumulators.
//   * The producer (ConvLoader with 128 threads) fills a ring of STAGES stages, each guarded by
//     two mbarriers: empty[s] (the consumers are done reading it: one arrive per consumer warp)
//     and full[s] (its copies have landed: one arrive per producer thread). For ring iteration
//     `it` it waits until empty[it % STAGES] is free, issues the stage's 16-byte cp.async copies
//     as one commit group, and keeps at most kLag = STAGES − 2 groups unsignalled: for the oldest
//     it waits (cp.async.wait_group), fences (fence.proxy.async: the copies are generic-proxy
//     writes, wgmma reads through the async proxy) and arrives on that stage's full barrier
//     (release; the consumers' wait is an acquire). While the next stage is not yet free it
//     signals its landed groups instead of waiting (mbarrier.test_wait), so a consumer never
//     waits for a stage whose copies have landed because the producer is blocked on another.
//   * Consumers: wait full[s], 4 k-steps of m64nBNk16 (tf32: k8) per 64 rows, commit,
//     wgmma.wait_group 1 (the previous stage's products are done), release the previous stage.
//     Cooperative (PP false): both consumers work on every tile, 64 rows each. Ping-pong (PP
//     true): the consumers take the CTA's tiles in turn, all 128 rows each (two m64
//     instructions a k-step), so one's epilogue overlaps the other's products: for short K-dims
//     (the 1×1 layers), whose tiles are mostly epilogue. The consumers take turns (mbarriers
//     turn[0], turn[1]): one's main loop starts when the other's main loop ends.
//   * Persistent: gridDim.x ≤ tiles CTAs, each walking tiles blockIdx.x, + gridDim.x, … (channel
//     tiles fastest, so CTAs running at once share activation rows in L2). The ring runs on across
//     tiles (the CTA's i-th tile is ring iterations [i·ktiles, (i + 1)·ktiles)), so the producer
//     copies the next tile while the consumers run the epilogue.
//   * The epilogue has its own shared memory (not the ring): each consumer warpgroup stages its
//     fp32 accumulators EC channels at a time in its region [rows][EC + 4], syncs only its own
//     128 threads (named barrier 1 + consumer), and runs conv_epilogue (conv_nhwc_common.cuh:
//     bias, residual loads batched before the stores, activation, tf32 rounding at fp32 storage)
//     on those rows and columns.
//
// Deadlock freedom: the producer at iteration `it` waits for the release of iteration
// it − STAGES; every earlier iteration gets signalled while it waits, and a consumer releases a
// stage after its own earlier stages only (named barriers span one consumer warpgroup); in
// ping-pong a consumer also waits for the other's main loop of the tile before its own (turn[c]),
// which needs only stages before its own.
// Phases: iteration `it` uses stage it % STAGES in its (it / STAGES)-th round; the consumers wait
// full with parity round & 1, the producer waits empty with parity (round & 1) ^ 1 (a fresh
// barrier counts its "previous" phase, parity 1, as complete, so the first round never waits).
// A parity wait is right only while the waiter is at most one phase ahead of the barrier: the
// producer and cooperative consumers are (each passed the stage's previous round itself);
// ping-pong consumers are by their turns (without them a consumer could wait on a stage's second
// phase while its first was pending, take it as complete, and the kernel would hang).
//
// No split-K (the tuner offers split 1 only; launch_conv_nhwc runs these tiles unsplit).
// Programmatic dependent launch (pdl.cuh): every thread waits (pdl_wait) before any copy or
// store; each role calls pdl_launch_dependents once it starts its CTA's last tile.

#include "backends/cuda/kernels/conv_nhwc_wgmma.cuh"
#include "backends/cuda/kernels/mbarrier.cuh"

namespace redwood::cuda::kernels::nhwc {

/// Block tile BM × BN (BM 128), STAGES ring stages, EC epilogue channels staged at a time; PP:
/// ping-pong (each consumer warpgroup whole tiles in turn) rather than cooperative (both on
/// every tile, 64 rows each).
template <int BM, int BN, int STAGES, int EC, bool PP> struct WsTile {
  static constexpr int kStages = STAGES, kThreads = 384, kLag = STAGES - 2;
  static constexpr int kWgRows = PP ? BM : BM / 2, kMI = kWgRows / 64, kAcc = BN / 2, kLDC = EC + 4;
  static constexpr int kEmptyArrivals = PP ? 4 : 8;  // the warps of the consumers that read a stage
  static constexpr int kStageABytes = BM * 128, kStageBBytes = BN * 128;
  static constexpr int kRingBytes = kStages * (kStageABytes + kStageBBytes);
  static constexpr int kEpiBytes = 2 * kWgRows * kLDC * 4;  // one region per consumer warpgroup
  static constexpr int kBarBytes = (2 * kStages + 2) * 8;  // full, empty, and ping-pong's two turns
  // + 1024: the dynamic shared memory is aligned up to the swizzle atom in the kernel.
  static constexpr int kSmemBytes = kRingBytes + kEpiBytes + kBarBytes + 1024;
  // setmaxnreg: 128 · producer + 256 · consumer = 384 · 168 (the registers a CTA of 384 threads
  // gets at __launch_bounds__(384, 1)). The producer's im2col copies need far more than a TMA
  // producer's 40: its rows' window corners (3 · BM/16), its B rows' addresses (BN/16 copies),
  // which the compiler keeps across the K loop, and the projection shortcut's second input.
  // At these counts ptxas (sm_90a, nvcc 13.0) spills nothing in either role (at 104/200 and
  // 120/192 it spilled 28 and 100 bytes).
  static constexpr int kProducerRegs = BN == 256 ? 152 : 136, kConsumerRegs = BN == 256 ? 176 : 184;
  static_assert(BM == 128, "two m64 rows of instructions a tile");
  static_assert(BN == 64 || BN == 128 || BN == 256, "n 64/128/256");
  static_assert(kMI * kAcc <= 128, "accumulators a consumer thread");
  static_assert(BN % EC == 0 && EC % 8 == 0, "whole n8 blocks an epilogue pass");
  static_assert(STAGES >= 3, "kLag ≥ 1");
  // + 64: conv_epilogue's static shared word (its split-K path, unused here) beside the dynamic memory.
  static_assert(kSmemBytes + 64 <= 227 * 1024, "shared memory of one multiprocessor");
};

// cp.async.wait_group n for a run-time n ≤ N (the instruction takes an immediate).
template <int N> __device__ __forceinline__ void cp_async_wait_upto(int n) {
  if constexpr (N == 0) {
    cp_async_wait<0>();
  } else {
    if (n >= N) {
      cp_async_wait<N>();
    } else {
      cp_async_wait_upto<N - 1>(n);
    }
  }
}
// Named barrier `id` among `count` threads (whole warps).
__device__ __forceinline__ void named_bar_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

template <typename T, int BM, int BN, int STAGES, int EC, bool PP>
__global__ void __launch_bounds__(384, 1) conv_nhwc_wgmma_ws(ConvArgs<T> a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Tl = WsTile<BM, BN, STAGES, EC, PP>;
  constexpr int BK = 128 / static_cast<int>(sizeof(T)), kStages = Tl::kStages, kLag = Tl::kLag;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* const smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  T* const as_all = reinterpret_cast<T*>(smem);
  T* const bs_all = reinterpret_cast<T*>(smem + kStages * Tl::kStageABytes);
  float* const epi = reinterpret_cast<float*>(smem + Tl::kRingBytes);
  const std::uint32_t full0 = smem_u32(smem + Tl::kRingBytes + Tl::kEpiBytes), empty0 = full0 + kStages * 8;
  const std::uint32_t turn0 = empty0 + kStages * 8;  // ping-pong: turn[c], consumer c's go-ahead

  const int t = threadIdx.x, wg = t >> 7, tw = t & 127;
  if (t == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full0 + s * 8, 128);                 // every producer thread, after its own copies landed
      mbar_init(empty0 + s * 8, Tl::kEmptyArrivals);  // every warp that read the stage, after its wgmmas
    }
    mbar_init(turn0, 4);  // the other consumer's warps, after their main loop of a tile
    mbar_init(turn0 + 8, 4);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  pdl_wait();  // before the first copy of an activation and the first store (pdl.cuh)

  const int n_tiles = a.n_tiles;
  const int tiles = ((a.m_total + BM - 1) / BM) * n_tiles;
  const int ktiles = (a.kdim + BK - 1) / BK;

  if (wg == 0) {
    // ---- producer ----
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Tl::kProducerRegs));
    int it = 0, signalled = 0;  // ring iterations issued, and those whose full barrier this thread arrived on
    // The oldest unsignalled iteration: its copies landed (at most `keep` younger groups in
    // flight), fenced for the async proxy, announced.
    auto signal_oldest = [&](int keep) {
      cp_async_wait_upto<kLag>(keep);
      fence_proxy_async();
      mbar_arrive(full0 + (signalled % kStages) * 8);
      ++signalled;
    };
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      if (tile + static_cast<int>(gridDim.x) >= tiles) pdl_launch_dependents();
      const int m0 = (tile / n_tiles) * BM, n0 = (tile % n_tiles) * BN;
      ConvLoader<T, 8, BM, BN, 128> ld(a, m0, n0, 0, a.kdim, tw);
      for (int kt = 0; kt < ktiles; ++kt) {
        const int s = it % kStages;
        const std::uint32_t parity = ((it / kStages) & 1) ^ 1;
        // Until the stage is free, announce what has landed; with nothing left, just wait.
        while (!mbar_test(empty0 + s * 8, parity)) {
          if (signalled == it) {
            mbar_wait(empty0 + s * 8, parity);
            break;
          }
          signal_oldest(it - signalled - 1);
        }
        ld.load_b(bs_all + s * BN * BK, kt * BK);
        ld.load_a(as_all + s * BM * BK);
        cp_async_commit();
        ++it;
        if (it - signalled > kLag) signal_oldest(kLag);
      }
    }
    while (signalled < it) signal_oldest(it - signalled - 1);
  } else {
    // ---- consumers ----
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Tl::kConsumerRegs));
    const int c = wg - 1, warp = (t >> 5) & 3, lane = t & 31;
    const std::uint32_t a_base = smem_u32(as_all) + (PP ? 0 : c * Tl::kWgRows * 128), b_base = smem_u32(bs_all);
    float* const cs = epi + c * Tl::kWgRows * Tl::kLDC;
    float acc[Tl::kMI][Tl::kAcc];
    int local = 0;  // the tile's place in this CTA's walk
    int mine = 0;   // ping-pong: the tiles this consumer has multiplied
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x, ++local) {
      if (PP && (local & 1) != c) continue;  // ping-pong: the other consumer's tile
      if constexpr (PP) {
        // Ping-pong order: tile `local` is multiplied once the other consumer's main loop of tile
        // local − 1 is done. Besides alternating the tensor cores between the two (one
        // multiplies while the other runs its epilogue), this keeps every full-barrier wait at
        // most one phase ahead of the barrier, which a parity wait needs: without it consumer 1
        // would wait for the second phase of full[0] while the first is pending, and a parity
        // wait takes the phase before the current one as complete.
        if (local > 0) mbar_wait(turn0 + c * 8, (c == 1 ? mine : mine - 1) & 1);
      }
      const int m0 = (tile / n_tiles) * BM, n0 = (tile % n_tiles) * BN;
#pragma unroll
      for (int i = 0; i < Tl::kMI; ++i)
#pragma unroll
        for (int v = 0; v < Tl::kAcc; ++v) acc[i][v] = 0.f;
      int it = local * ktiles;
      for (int kt = 0; kt < ktiles; ++kt, ++it) {
        const int s = it % kStages;
        mbar_wait(full0 + s * 8, (it / kStages) & 1);
        // After it the previous iteration's products are done: its stage is free.
        wgmma_k_tile<T, BN>(acc, a_base + s * Tl::kStageABytes, b_base + s * Tl::kStageBBytes);
        if (kt > 0 && lane == 0) mbar_arrive(empty0 + ((it - 1) % kStages) * 8);
      }
      if constexpr (PP) {
        if (lane == 0) mbar_arrive(turn0 + (1 - c) * 8);  // the other consumer's turn
        ++mine;
      }
      wgmma_wait<0>();
      fence_accumulators(acc);
      if (lane == 0) mbar_arrive(empty0 + ((it - 1) % kStages) * 8);
      if (tile + static_cast<int>(gridDim.x) >= tiles) pdl_launch_dependents();

      // Epilogue, EC channels at a time through this warpgroup's own region.
      const int g = lane >> 2, tq = lane & 3, wrow = warp * 16 + g;
#pragma unroll
      for (int pass = 0; pass < BN / EC; ++pass) {
        named_bar_sync(1 + c, 128);  // the region's previous reads are done
#pragma unroll
        for (int i = 0; i < Tl::kMI; ++i)
#pragma unroll
          for (int j = 0; j < EC / 8; ++j) {
            const int jj = pass * (EC / 8) + j, col = 8 * j + 2 * tq, row = wrow + 64 * i;
            *reinterpret_cast<float2*>(cs + row * Tl::kLDC + col) = make_float2(acc[i][4 * jj], acc[i][4 * jj + 1]);
            *reinterpret_cast<float2*>(cs + (row + 8) * Tl::kLDC + col) =
                make_float2(acc[i][4 * jj + 2], acc[i][4 * jj + 3]);
          }
        named_bar_sync(1 + c, 128);
        conv_epilogue<T, Tl::kWgRows, EC, Tl::kLDC, 128>(a, cs, m0 + (PP ? 0 : c * Tl::kWgRows), n0 + pass * EC, 0, 0,
                                                         1, tw);
      }
    }
  }
#else
  // Built for another architecture: never launched (the tuner offers these tiles only on sm_90a).
  __trap();
#endif
}

}  // namespace redwood::cuda::kernels::nhwc
