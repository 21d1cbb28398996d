#pragma once
// The warp-specialized, persistent wgmma kernels of rw.ConvNhwc (conv_nhwc_wgmma_ws.cuh), as the
// launcher (conv_nhwc.cu) takes them. Defined in conv_nhwc_wgmma_ws.cu, compiled for sm_90a only
// and only where the build has the wgmma kernels (REDWOOD_HAVE_CONV_WGMMA, conv_nhwc_wgmma.hpp).

#include "backends/cuda/kernels/conv_nhwc_wgmma.hpp"

namespace redwood::cuda::kernels::nhwc {

/// The number of warp-specialized kernels; nhwc_conv_tiles() lists them, in this order, with
/// `ws` 0, 1, …. Each is launched persistent: min(tiles, multiprocessors) CTAs of 384 threads.
inline constexpr int kWgmmaWsKernels = 5;

/// Kernel `index` (0 ≤ index < kWgmmaWsKernels), its shared-memory opt-in done (once per process).
/// T: half, __nv_bfloat16, or float (fp32 storage, tf32 products).
template <typename T> const WgmmaLaunch<T>& wgmma_ws_launch_of(int index);

}  // namespace redwood::cuda::kernels::nhwc
