// The warp-specialized, persistent wgmma kernels of rw.ConvNhwc (conv_nhwc_wgmma_ws.cuh),
// instantiated for fp16, bf16 and fp32 storage (tf32 products). Compiled for sm_90a alone
// (backends/cuda/CMakeLists.txt), apart from conv_nhwc_wgmma.cu so the two build in parallel.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/conv_nhwc_wgmma_ws.cuh"
#include "backends/cuda/kernels/conv_nhwc_wgmma_ws.hpp"

#include <mutex>

namespace redwood::cuda::kernels::nhwc {
namespace {

template <typename T, int BM, int BN, int STAGES, int EC, bool PP> WgmmaLaunch<T> entry() {
  using Tl = WsTile<BM, BN, STAGES, EC, PP>;
  return {conv_nhwc_wgmma_ws<T, BM, BN, STAGES, EC, PP>, Tl::kSmemBytes, Tl::kThreads, BM, BN};
}

}  // namespace

// In the order of nhwc_conv_tiles()' ws rows (conv_nhwc.cu). Stages and epilogue passes chosen
// to fill the 227 KiB of a multiprocessor with the ring. Cooperative: 128×128, 5 stages, the
// epilogue 64 channels a pass (195 KiB); 128×256, 4 stages, 32 channels a pass (211 KiB);
// 128×64, 6 stages, 64 channels (179 KiB). Ping-pong (for short K-dims): 128×128, 4 stages (197
// KiB), and 128×64, 6 stages (213 KiB), 64 channels a pass of 128 rows.
template <typename T> const WgmmaLaunch<T>& wgmma_ws_launch_of(int index) {
  static const WgmmaLaunch<T> table[kWgmmaWsKernels] = {
      entry<T, 128, 128, 5, 64, false>(), entry<T, 128, 256, 4, 32, false>(), entry<T, 128, 64, 6, 64, false>(),
      entry<T, 128, 128, 4, 64, true>(), entry<T, 128, 64, 6, 64, true>()};
  static std::once_flag opted_in;
  std::call_once(opted_in, [] {
    for (const WgmmaLaunch<T>& l : table) {
      RW_CUDA_CHECK(cudaFuncSetAttribute(l.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, l.smem));
    }
  });
  return table[index];
}

template const WgmmaLaunch<half>& wgmma_ws_launch_of<half>(int);
template const WgmmaLaunch<__nv_bfloat16>& wgmma_ws_launch_of<__nv_bfloat16>(int);
template const WgmmaLaunch<float>& wgmma_ws_launch_of<float>(int);

}  // namespace redwood::cuda::kernels::nhwc
