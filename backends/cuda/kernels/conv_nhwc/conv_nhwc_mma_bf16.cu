// rw.ConvNhwc's tiles at bf16 storage: one translation unit of the typed launches
// (conv_nhwc_launch.hpp), its kernels compiled beside the other types'.

#include "backends/cuda/kernels/conv_nhwc/conv_nhwc_mma_launch.cuh"

namespace redwood::cuda::kernels::nhwc_launch {

void launch_bf16(const Request& r) { launch_typed<__nv_bfloat16>(r); }

}  // namespace redwood::cuda::kernels::nhwc_launch
