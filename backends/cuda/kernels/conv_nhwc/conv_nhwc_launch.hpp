#pragma once
// The typed launches of rw.ConvNhwc's tiles, one translation unit per storage type and product
// (conv_nhwc_mma_f16.cu, _bf16.cu, _tf32.cu, _3xtf32.cu), so that the ~90 kernel instantiations
// compile in parallel; launch_conv_nhwc (conv_nhwc_tiles.cpp) picks one. Internal to the folder.

#include "backends/cuda/kernels/conv_nhwc/conv_nhwc.hpp"

#include <cstddef>

namespace redwood::cuda::kernels::nhwc_launch {

/// One launch, as launch_conv_nhwc was given it, the tile and split count checked.
struct Request {
  const ConvShape& p;
  const void* x;
  const void* w;
  void* y;
  const float* bias;
  const void* residual;
  const Epilogue& e;
  int tile, splits;
  void* workspace;
  cudaStream_t stream;
  int* counters;
  bool round_tf32;  // fp32 storage at tf32 only
  const void* x2;
};

void launch_f16(const Request& r);
void launch_bf16(const Request& r);
/// fp32 storage, tf32 products.
void launch_tf32(const Request& r);
/// fp32 storage, fp32-accurate products from three tf32 ones (MmaTf32x3).
void launch_3xtf32(const Request& r);

inline long long m_total_of(const ConvShape& p) { return static_cast<long long>(p.n) * p.oh * p.ow; }
inline int kdim_of(const ConvShape& p) { return p.r * p.s * p.c + p.c2; }
inline long long tiles_of(const ConvShape& p, const NhwcTile& t) {
  return ((m_total_of(p) + t.bm - 1) / t.bm) * ((p.k + t.bn - 1) / t.bn);
}
/// The split-K counters' share of the workspace, rounded to 256 bytes.
inline std::size_t counter_bytes(long long tiles) {
  constexpr long long kAlign = 256;
  return static_cast<std::size_t>((tiles * 4 + kAlign - 1) / kAlign * kAlign);
}

/// Which mma.sync tiles (of the first kMmaTiles of nhwc_conv_tiles()) also have an instantiation
/// that reads a projection shortcut (input 4 of rw.ConvNhwc): the 128×128, 128×64 and the
/// small-M ones (batch 1), not all sixteen, to keep the compile time; every wgmma tile has one.
inline constexpr int kMmaTiles = 16;
inline constexpr bool kShortcutTile[kMmaTiles] = {true,  false, true, false, true,  true,  true,  false,
                                                  true,  true,  false, false, false, false, false, false};

}  // namespace redwood::cuda::kernels::nhwc_launch
