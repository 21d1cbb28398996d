#pragma once
// Launcher of the NHWC tensor-core convolution (conv_nhwc_mma.cuh, conv_nhwc_tiles.cpp) and the
// choices its tuner (conv_nhwc.cpp) picks from. x is [N, H, W, C], w is [K, R, S, C], y and the residual
// are [N, OH, OW, K], all in the storage type (fp16, bf16, or fp32 with tf32 products); the bias
// is fp32 [K]. C is a multiple of a 16-byte chunk's channels (8 of a 16-bit type, 4 of fp32), K a
// multiple of 8, and every tensor is 16-byte aligned (the rw.ConvNhwc contract).

#include "backends/cuda/kernels/kernel_params.hpp"
#include "backends/cuda/kernels/nhwc/nhwc_storage.hpp"

#include <cstddef>
#include <vector>

namespace redwood::cuda::kernels {


/// A block tile: bm output pixels × bn output channels, bk of K-dim a pipeline stage, `threads`
/// per block.
struct NhwcTile {
  int bm, bn, bk, threads;
  const char* name;  // "128x64"; "k64" when bk is 64; "wg" first for wgmma
  int wgmma = -1;    // ≥ 0: the Hopper wgmma kernel of that index (conv_nhwc_wgmma.hpp; fp16/bf16, fp32 at tf32)
  int narrow = 0;    // > 0: the narrow kernel's variant narrow − 1 (conv_nhwc_narrow.hpp; bm is then
                     // nominal: a warp's pixels a step depend on the variant and K-dim), 16-bit only
  int tma = -1;      // ≥ 0: the TMA-fed wgmma kernel of that index (conv_nhwc_wgmma_tma.hpp; "tma"
                     // first; where the wgmma tiles run and nhwc_tma_fits says yes)
};

/// One way to run: a tile (index into nhwc_conv_tiles()) and the number of K-dim ranges.
struct NhwcConvConfig {
  int tile = 0;
  int splits = 1;
  bool operator==(const NhwcConvConfig& o) const { return tile == o.tile && splits == o.splits; }
};

/// In this order: 128×128 (8 warps of 64×32), 128×128w4 (4 warps of 64×64), 128×64, 64×128,
/// 64×64, 64×32, 32×64 (the small-M tiles for batch 1; all these BK 32, 4 stages), 128×128k64
/// and 128×64k64 (BK 64, 3 stages), 64×64k64 (BK 64, 4 stages), 256×64 (8 warps of 64×32, BK 32,
/// for 64-channel layers), 128×128w4k64, 64×128k64 and 256×64k64 (BK 64, 3 stages), and
/// 128×64k64s and 128×128w4k64s. Fragments are double-buffered (conv_nhwc_mma.cuh) except in the
/// 8-warp 64×32-warp-tile ones (128×128, 128×128k64, 256×64) and the "s" ones: the tuner sees both.
/// Then, where the build has them (sm_90 among its architectures), the wgmma tiles (BK 64, 4
/// stages): wg128x128, wg128x256, wg256x128, wg128x64 (two warpgroups) and wg64x128 (one), then
/// wg128x128s3 and wg128x64s3 (3 stages: less shared memory, more blocks a multiprocessor).
/// Then the TMA-fed wgmma tiles (conv_nhwc_wgmma_tma.cuh): tma128x128, tma128x256, tma256x128,
/// tma128x64s3, tma64x128, tma128x128s3 (one thread issues the copies), and tmaws128x128,
/// tmaws128x128s3, tmaws128x64, tmaws128x256 (a producer warp issues them).
/// Last, the narrow kernel's variants (narrow_variant): narrow16, narrow32, narrow16p, narrow32p.
const std::vector<NhwcTile>& nhwc_conv_tiles();

/// Whether the wgmma tiles can run here: the build has them and the current device has compute
/// capability 9.0 (their code is sm_90a SASS only). False without a usable device.
bool nhwc_wgmma_usable();

/// Whether the TMA-fed wgmma tiles (tma ≥ 0) take this layer at this storage: the build has them,
/// no shortcut input, C a multiple of 64 16-bit channels (32 fp32), square stride, padding,
/// dilation and filter (conv_nhwc_wgmma_tma.hpp). Host only.
bool nhwc_tma_fits(const ConvShape& p, NhwcStorage storage);

/// The kernel families beyond the mma.sync tiles that a layer's candidates may include.
struct NhwcFamilies {
  bool wgmma = false;   // the wgmma tiles: the caller checked nhwc_wgmma_usable() and the storage
                        // (a 16-bit type, or fp32 at tf32) and CudaOptions::wgmma
  bool tma = false;     // with wgmma, the TMA-fed ones where nhwc_tma_fits (CudaOptions::tma)
  bool narrow = false;  // the narrow kernel's variants where they fit (16-bit storage; CudaOptions::narrow_conv)
};

/// Split counts worth trying for a tile: 1, then powers of two up to 16 while the grid stays
/// within about four blocks per multiprocessor and each split keeps at least 4 of the tile's K tiles
/// (`storage` sets the K tile: bk elements of a 16-bit type, bk / 2 of fp32).
std::vector<int> nhwc_split_choices(const ConvShape& p, int tile, int multiprocessors,
                                    NhwcStorage storage = NhwcStorage::kF16);
/// Every (tile, splits) pair the tuner may time, in a fixed order: the mma.sync tiles, then the
/// families `families` names where the layer fits them (the narrow kernel's at split 1, where
/// conv_nhwc_narrow_fits(p)).
std::vector<NhwcConvConfig> nhwc_conv_candidates(const ConvShape& p, int multiprocessors, NhwcFamilies families = {},
                                                 NhwcStorage storage = NhwcStorage::kF16);
/// The pick without measurement: 128×128 when it fills the GPU, else 64×64 with splits for about
/// two blocks per multiprocessor.
NhwcConvConfig nhwc_conv_default(const ConvShape& p, int multiprocessors, NhwcStorage storage = NhwcStorage::kF16);
/// Workspace of a configuration: the per-tile counters and fp32 partial sums of split-K (0 for one split).
std::size_t nhwc_conv_workspace_bytes(const ConvShape& p, NhwcConvConfig cfg);

/// y = act(conv(x, w) + bias + residual), rounded to the storage type once. p.c is x's (padded)
/// channel count, p.groups must be 1; bias and residual may be null; e.bias/e.residual are
/// ignored (the residual is in the storage type here). `workspace` holds nhwc_conv_workspace_bytes(p, cfg)
/// (may be null for one split). Launched with programmatic dependent launch (pdl.cuh).
/// `counters`: split-K arrival counters that are zero between launches (split_k_counter_address,
/// at least nhwc_conv_tile_count(p, cfg) of them); without them the launch zeroes the workspace's
/// share with a memset first (a graph node that also cuts the programmatic launch chain).
/// `split_tf32` (fp32 storage only; precision fp32): each product is three tf32 products of the
/// operands split into big and small parts ("3xTF32", conv_nhwc_mma.cuh's MmaTf32x3), as accurate
/// as fp32 FMAs; without it fp32 storage multiplies the operands rounded to tf32 (precision tf32).
/// `round_tf32` (fp32 storage at precision tf32, the node's rw.round_tf32): y is stored rounded to
/// tf32 (cvt.rna.tf32.f32), so the next convolution's tensor cores take it exactly.
/// `x2` (with p.c2 > 0; a 1×1 stride-1 convolution): the projection shortcut's input [N, p.h2,
/// p.w2, p.c2], read at stride p.stride2 for K-dim p.c … p.c + p.c2 − 1 (w is [K, 1, 1, C + C2]);
/// not with the narrow kernel's variants.
void launch_conv_nhwc(const ConvShape& p, NhwcStorage storage, const void* x, const void* w, void* y,
                      const float* bias, const void* residual, const Epilogue& e, NhwcConvConfig cfg, void* workspace,
                      cudaStream_t stream, int* counters = nullptr, bool split_tf32 = false, bool round_tf32 = false,
                      const void* x2 = nullptr);
/// Output tiles of a configuration (a split-K launch needs a counter each).
long long nhwc_conv_tile_count(const ConvShape& p, NhwcConvConfig cfg);

}  // namespace redwood::cuda::kernels
