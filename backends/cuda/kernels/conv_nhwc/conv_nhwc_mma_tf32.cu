// rw.ConvNhwc's tiles at fp32 storage with tf32 products (precision tf32): one translation unit of
// the typed launches (conv_nhwc_launch.hpp), its kernels compiled beside the other types'.

#include "backends/cuda/kernels/conv_nhwc/conv_nhwc_mma_launch.cuh"

namespace redwood::cuda::kernels::nhwc_launch {

void launch_tf32(const Request& r) { launch_typed<float>(r); }

}  // namespace redwood::cuda::kernels::nhwc_launch
