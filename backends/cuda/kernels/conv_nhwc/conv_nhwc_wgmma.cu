// The wgmma kernels of rw.ConvNhwc (conv_nhwc_wgmma.cuh), instantiated for fp16, bf16 and fp32
// storage (tf32 products). This file alone is compiled for sm_90a (backends/cuda/CMakeLists.txt):
// wgmma exists only there.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/conv_nhwc/conv_nhwc_wgmma.cuh"
#include "backends/cuda/kernels/conv_nhwc/conv_nhwc_wgmma.hpp"

#include <mutex>

namespace redwood::cuda::kernels::nhwc {
namespace {

template <typename T, bool SC, int BM, int BN, int WGS, int STAGES> WgmmaLaunch<T> entry() {
  using Tl = WgTile<BM, BN, WGS, STAGES>;
  return {conv_nhwc_wgmma<T, BM, BN, WGS, STAGES, SC>, Tl::kSmemBytes, Tl::kThreads, BM, BN};
}

}  // namespace

// In the order of nhwc_conv_tiles()' wgmma rows (conv_nhwc.cu): 128×128, 128×256, 256×128
// (two warpgroups, 4 stages), 128×64 (two warpgroups of m64n64; 96 KiB, two blocks a
// multiprocessor), 64×128 (one warpgroup, for grids that 128-row tiles leave short), and
// 128×128 and 128×64 with 3 stages (one tile of copies ahead; 97 and 73 KiB, so two and three
// blocks a multiprocessor: for short K-dims, such as ResNet's 1×1 expansions, where one block's
// epilogue then overlaps another's copies).
template <typename T, bool SC> const WgmmaLaunch<T>& wgmma_launch_of(int index) {
  static const WgmmaLaunch<T> table[kWgmmaKernels] = {
      entry<T, SC, 128, 128, 2, 4>(), entry<T, SC, 128, 256, 2, 4>(), entry<T, SC, 256, 128, 2, 4>(),
      entry<T, SC, 128, 64, 2, 4>(),  entry<T, SC, 64, 128, 1, 4>(),  entry<T, SC, 128, 128, 2, 3>(),
      entry<T, SC, 128, 64, 2, 3>()};
  static std::once_flag opted_in;
  std::call_once(opted_in, [] {
    for (const WgmmaLaunch<T>& l : table) {
      RW_CUDA_CHECK(cudaFuncSetAttribute(l.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, l.smem));
    }
  });
  return table[index];
}

template const WgmmaLaunch<half>& wgmma_launch_of<half, false>(int);
template const WgmmaLaunch<__nv_bfloat16>& wgmma_launch_of<__nv_bfloat16, false>(int);
template const WgmmaLaunch<float>& wgmma_launch_of<float, false>(int);
template const WgmmaLaunch<half>& wgmma_launch_of<half, true>(int);
template const WgmmaLaunch<__nv_bfloat16>& wgmma_launch_of<__nv_bfloat16, true>(int);
template const WgmmaLaunch<float>& wgmma_launch_of<float, true>(int);

}  // namespace redwood::cuda::kernels::nhwc
