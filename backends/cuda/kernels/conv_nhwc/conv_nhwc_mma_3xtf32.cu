// rw.ConvNhwc's tiles at fp32 storage with fp32-accurate products of three tf32 ones (precision
// fp32): one translation unit of the typed launches (conv_nhwc_launch.hpp), its kernels compiled
// beside the other types'.

#include "backends/cuda/kernels/conv_nhwc/conv_nhwc_mma_launch.cuh"

namespace redwood::cuda::kernels::nhwc_launch {

void launch_3xtf32(const Request& r) { launch_typed<float, nhwc::MmaTf32x3>(r); }

}  // namespace redwood::cuda::kernels::nhwc_launch
