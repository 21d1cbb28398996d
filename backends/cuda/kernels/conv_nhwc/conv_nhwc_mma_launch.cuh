#pragma once
// The typed launch of rw.ConvNhwc's tiles (conv_nhwc_launch.hpp): the mma.sync tiles' kernel
// table, instantiated by the one translation unit of each storage type that includes this, and the
// wgmma and TMA tiles' launchers (conv_nhwc_wgmma*.cu, compiled apart for sm_90a).

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/conv_nhwc/conv_nhwc_launch.hpp"
#include "backends/cuda/kernels/conv_nhwc/conv_nhwc_mma.cuh"
#ifdef REDWOOD_HAVE_CONV_WGMMA
#include "backends/cuda/kernels/conv_nhwc/conv_nhwc_wgmma.hpp"
#include "backends/cuda/kernels/conv_nhwc/conv_nhwc_wgmma_tma.hpp"
#endif
#include "core/error.hpp"

#include <mutex>
#include <string>
#include <type_traits>

namespace redwood::cuda::kernels::nhwc_launch {

template <typename T> struct Launch {
  void (*kernel)(nhwc::ConvArgs<T>);
  int smem, threads, bm, bn;
};

// Op: the products (conv_nhwc_mma.cuh): MmaOf<T>, or MmaTf32x3 (fp32 storage at precision fp32).
// SC: the shortcut instantiation, where the tile has one (HAS_SC); else an empty row.
template <typename T, typename Op, bool SC, bool HAS_SC, int BM, int BN, int WM, int WN, int BK = 32, int STAGES = 4,
          bool DB = true>
Launch<T> entry() {
  using Tl = nhwc::Tile<BM, BN, WM, WN, BK, STAGES, DB>;
  if constexpr (SC && !HAS_SC) {
    return {nullptr, 0, 0, BM, BN};
  } else {
    return {nhwc::conv_nhwc_mma<T, BM, BN, WM, WN, BK, STAGES, DB, Op, SC>, Tl::kSmemBytes, Tl::kThreads, BM, BN};
  }
}

// One row per mma.sync NhwcTile of nhwc_conv_tiles(), in that order.
template <typename T, typename Op, bool SC> const Launch<T>& launch_of(int tile) {
  // 8-warp tiles of 64×32 warp tiles keep 128 registers a thread (2 blocks a multiprocessor)
  // with single-buffered fragments; double-buffered they spill.
  constexpr const bool* h = kShortcutTile;
  static const Launch<T> table[kMmaTiles] = {
      entry<T, Op, SC, h[0], 128, 128, 64, 32, 32, 4, false>(),
      entry<T, Op, SC, h[1], 128, 128, 64, 64>(),
      entry<T, Op, SC, h[2], 128, 64, 64, 32>(),
      entry<T, Op, SC, h[3], 64, 128, 32, 64>(),
      entry<T, Op, SC, h[4], 64, 64, 32, 32>(),
      entry<T, Op, SC, h[5], 64, 32, 32, 16>(),
      entry<T, Op, SC, h[6], 32, 64, 16, 32>(),
      entry<T, Op, SC, h[7], 128, 128, 64, 32, 64, 3, false>(),
      entry<T, Op, SC, h[8], 128, 64, 64, 32, 64, 3>(),
      entry<T, Op, SC, h[9], 64, 64, 32, 32, 64, 4>(),
      entry<T, Op, SC, h[10], 256, 64, 64, 32, 32, 4, false>(),
      entry<T, Op, SC, h[11], 128, 128, 64, 64, 64, 3>(),
      entry<T, Op, SC, h[12], 64, 128, 32, 64, 64, 3>(),
      entry<T, Op, SC, h[13], 256, 64, 64, 32, 64, 3>(),
      entry<T, Op, SC, h[14], 128, 64, 64, 32, 64, 3, false>(),
      entry<T, Op, SC, h[15], 128, 128, 64, 64, 64, 3, false>()};
  // Over 48 KiB of dynamic shared memory needs the kernel's opt-in, once per process.
  static std::once_flag opted_in;
  std::call_once(opted_in, [] {
    for (const Launch<T>& l : table) {
      if (l.kernel != nullptr) {
        RW_CUDA_CHECK(cudaFuncSetAttribute(l.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, l.smem));
      }
    }
  });
  if (table[tile].kernel == nullptr) {
    throw Unsupported(std::string("rw.ConvNhwc: the tile ") + nhwc_conv_tiles()[static_cast<std::size_t>(tile)].name +
                      " has no instantiation for a shortcut input");
  }
  return table[tile];
}

// The mma.sync kernel of a tile, or its wgmma kernel (conv_nhwc_wgmma.cu): fp16 and bf16 storage,
// and fp32 storage with tf32 products (Op MmaTf32; not 3xTF32's three products).
template <typename T, typename Op, bool SC> Launch<T> kernel_of(int tile) {
  const int wg = nhwc_conv_tiles()[static_cast<std::size_t>(tile)].wgmma;
  if (wg < 0) return launch_of<T, Op, SC>(tile);
#ifdef REDWOOD_HAVE_CONV_WGMMA
  if constexpr (std::is_same_v<Op, nhwc::MmaOf<T>>) {
    const nhwc::WgmmaLaunch<T>& k = nhwc::wgmma_launch_of<T, SC>(wg);
    return {k.kernel, k.smem, k.threads, k.bm, k.bn};
  }
#endif
  throw Unsupported(std::string("rw.ConvNhwc: the wgmma tile ") + nhwc_conv_tiles()[static_cast<std::size_t>(tile)].name +
                    " takes fp16, bf16, or fp32 storage at precision tf32 (not fp32's 3xTF32 products)");
}

template <typename T, typename Op = nhwc::MmaOf<T>> void launch_typed(const Request& r) {
  const ConvShape& p = r.p;
  const NhwcTile& nt = nhwc_conv_tiles()[static_cast<std::size_t>(r.tile)];
  Launch<T> l{nullptr, 0, 0, nt.bm, nt.bn};  // a TMA tile's kernel is its launcher's (below)
  if (nt.tma < 0) {
    l = r.x2 != nullptr ? kernel_of<T, Op, true>(r.tile) : kernel_of<T, Op, false>(r.tile);
  } else if (!std::is_same_v<Op, nhwc::MmaOf<T>> || r.x2 != nullptr) {
    throw Unsupported(std::string("rw.ConvNhwc: the TMA tile ") + nt.name +
                      " takes fp16, bf16, or fp32 storage at precision tf32 (not fp32's 3xTF32 products), and no "
                      "shortcut input");
  }
  nhwc::ConvArgs<T> a = nhwc::conv_args<T>(p, r.x, r.w, r.y, r.bias, r.residual, r.e);
  a.round_tf32 = r.round_tf32;
  a.x2 = static_cast<const T*>(r.x2);
  a.n_tiles = (p.k + l.bn - 1) / l.bn;
  const long long tiles = static_cast<long long>((a.m_total + l.bm - 1) / l.bm) * a.n_tiles;
  if (r.splits > 1) {
    a.partial = reinterpret_cast<float*>(static_cast<char*>(r.workspace) + counter_bytes(tiles));
    if (r.counters != nullptr) {
      a.counters = r.counters;  // zero between launches: the last block of each tile resets its own
    } else {
      // The workspace is packed with other values by lifetime (graph_runner.cpp), so counters
      // there start at zero only by this memset (a graph node, capturable).
      a.counters = static_cast<int*>(r.workspace);
      RW_CUDA_CHECK(cudaMemsetAsync(a.counters, 0, static_cast<std::size_t>(tiles) * 4, r.stream));
    }
  }
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(r.splits));
  if (nt.tma >= 0) {
#ifdef REDWOOD_HAVE_CONV_WGMMA
    if constexpr (std::is_same_v<Op, nhwc::MmaOf<T>>) {
      nhwc::launch_conv_nhwc_tma<T>(nt.tma, a, grid, r.stream);
      return;
    }
#endif
    throw Unsupported(std::string("rw.ConvNhwc: this build has no TMA tiles (") + nt.name + ")");
  }
  RW_CUDA_CHECK(launch_kernel(l.kernel, grid, dim3(l.threads), static_cast<std::size_t>(l.smem), r.stream, a));
  RW_CUDA_CHECK_LAUNCH("conv_nhwc_mma");
}

}  // namespace redwood::cuda::kernels::nhwc_launch
