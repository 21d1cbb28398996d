#pragma once
// The wgmma kernels of rw.ConvNhwc (conv_nhwc_wgmma.cuh), as the launcher (conv_nhwc.cu) takes
// them. Defined in conv_nhwc_wgmma.cu, which is compiled for sm_90a only and only where sm_90 is
// among the build's architectures (backends/cuda/CMakeLists.txt defines REDWOOD_HAVE_CONV_WGMMA
// then); elsewhere nothing here is defined and no wgmma tile is offered.

#include "backends/cuda/kernels/conv_nhwc/conv_nhwc_common.cuh"

namespace redwood::cuda::kernels::nhwc {

/// One wgmma kernel: what a launch needs (the mma.sync kernels' Launch in conv_nhwc.cu).
template <typename T> struct WgmmaLaunch {
  void (*kernel)(ConvArgs<T>);
  int smem, threads, bm, bn;
};

/// The number of wgmma kernels; nhwc_conv_tiles() lists them, in this order, with `wgmma` 0, 1, ….
inline constexpr int kWgmmaKernels = 7;

/// Kernel `index` (0 ≤ index < kWgmmaKernels), its shared-memory opt-in done (once per process).
/// T: half, __nv_bfloat16, or float (fp32 storage, tf32 products). SC: the instantiation that
/// reads a projection shortcut's second input (ConvLoader's SC, conv_nhwc_common.cuh).
template <typename T, bool SC = false> const WgmmaLaunch<T>& wgmma_launch_of(int index);

}  // namespace redwood::cuda::kernels::nhwc
