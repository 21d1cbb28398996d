#pragma once
// The TMA-fed wgmma kernels of rw.ConvNhwc (conv_nhwc_wgmma_tma.cuh), as the launcher
// (conv_nhwc_mma_launch.cuh) and the tile list (conv_nhwc_tiles.cpp) take them. Defined in
// conv_nhwc_wgmma_tma.cu, compiled for sm_90a only and only where the build has the wgmma kernels
// (REDWOOD_HAVE_CONV_WGMMA, conv_nhwc_wgmma.hpp). Host code may include this (no device code).

#include "backends/cuda/kernels/kernel_params.hpp"

#include <cuda_runtime_api.h>

namespace redwood::cuda::kernels::nhwc {

template <typename T> struct ConvArgs;  // conv_nhwc_common.cuh

/// The number of TMA kernels; nhwc_conv_tiles() lists them, in this order, with `tma` 0, 1, ….
inline constexpr int kWgmmaTmaKernels = 10;

/// Whether the TMA kernels take this layer at this storage (elem_bytes 2 or 4): no shortcut
/// input, C a multiple of a 128-byte stage row's elements, square stride, padding, dilation and
/// filter, within the TMA's limits (padding and box corners in ±127, strides ≤ 8, a filter
/// offset under 2^16). Host only.
bool conv_nhwc_tma_fits(const ConvShape& p, int elem_bytes);

/// Queues kernel `index` on `stream` with the arguments the launcher made (split-K fields
/// included) over `grid`: encodes the two tensor maps of a.x and a.w (host work, a few µs; the
/// maps travel by value in the kernel's parameters, so a captured graph keeps them). Throws
/// Unsupported where conv_nhwc_tma_fits says no, CudaError where the driver refuses a map.
template <typename T> void launch_conv_nhwc_tma(int index, const ConvArgs<T>& a, dim3 grid, cudaStream_t stream);

}  // namespace redwood::cuda::kernels::nhwc
