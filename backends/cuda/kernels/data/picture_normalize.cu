// A model's picture input normalized on the GPU (core/picture_input.hpp): the pixels come over
// as bytes and leave as the model's fp32 input, y = alpha[c] * p + beta[c]. Memory-bound; each
// thread writes consecutive floats of its warp's neighbours, so the stores coalesce:
//   NHWC: one thread per value; the pixels and the floats have the same order.
//   NCHW: one thread per pixel, reading its `channels` bytes and writing one float per plane.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/device_math.cuh"
#include "backends/cuda/kernels/launchers.hpp"
#include "backends/cuda/kernels/pdl.cuh"

#include <cstdint>

namespace redwood::cuda::kernels {
namespace {

// Rounded apart (no contraction into an FMA), as the host's normalize_picture.
__device__ __forceinline__ float normalized(std::uint8_t p, float alpha, float beta) {
  return __fadd_rn(__fmul_rn(static_cast<float>(p), alpha), beta);
}

__global__ void picture_nhwc_kernel(PictureNormalize p, const std::uint8_t* __restrict__ x, float* __restrict__ y,
                                    long long total) {
  pdl_wait();
  pdl_launch_dependents();
  RW_GRID_STRIDE(i, total) {
    const int c = static_cast<int>(i % p.channels);
    y[i] = normalized(x[i], p.alpha[c], p.beta[c]);
  }
}

__global__ void picture_nchw_kernel(PictureNormalize p, const std::uint8_t* __restrict__ x, float* __restrict__ y,
                                    long long pixels) {
  pdl_wait();
  pdl_launch_dependents();
  const long long plane = static_cast<long long>(p.height) * p.width;
  RW_GRID_STRIDE(i, pixels) {
    const long long row = i / plane, at = i % plane;
    const std::uint8_t* px = x + i * p.channels;
    float* out = y + row * plane * p.channels + at;
    for (int c = 0; c < p.channels; ++c) out[c * plane] = normalized(px[c], p.alpha[c], p.beta[c]);
  }
}

}  // namespace

void launch_picture_normalize(const PictureNormalize& p, const std::uint8_t* x, float* y, cudaStream_t stream) {
  const long long pixels = p.rows * p.height * p.width;
  if (pixels == 0) return;
  if (p.nchw && p.channels > 1) {
    launch_kernel(picture_nchw_kernel, grid_for(pixels), 256, 0, stream, p, x, y, pixels);
    RW_CUDA_CHECK_LAUNCH("picture_nchw");
  } else {
    const long long total = pixels * p.channels;
    launch_kernel(picture_nhwc_kernel, grid_for(total), 256, 0, stream, p, x, y, total);
    RW_CUDA_CHECK_LAUNCH("picture_nhwc");
  }
}

}  // namespace redwood::cuda::kernels
