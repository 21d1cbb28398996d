// rw.ToNhwc with rw.space_to_depth (nhwc_space_to_depth.hpp): a thread per output pixel of the
// space-to-depth image, lanes along its row, so that each (channel, dy) read of a warp is 64
// contiguous input floats (one float2 a lane where W is even) and each thread's 16-byte stores
// follow the previous lane's. An RGB 224×224 image at fp16 reads 12 floats and writes 32 bytes a
// thread: 19 MB in and 13 MB out at batch 32 (the plain conversion writes 26 MB, 8 channels of
// 224×224 pixels).

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/device_math.cuh"
#include "backends/cuda/kernels/nhwc/nhwc_space_to_depth.hpp"
#include "backends/cuda/kernels/nhwc/nhwc_vec.cuh"
#include "backends/cuda/kernels/pdl.cuh"
#include "core/error.hpp"

namespace redwood::cuda::kernels {
namespace {

constexpr int kThreads = 256;

// V: channels of one store (8 of a 16-bit type, 4 of fp32); CP: the space-to-depth's 4·C
// channels padded to V, the ones a thread computes (channels CP..cp-1 are stored as zeros).
// PAIRS: W even, so a pixel's two columns are one aligned float2.
template <typename T, int C, bool PAIRS>
__global__ void __launch_bounds__(kThreads)
    to_nhwc_space_to_depth_kernel(const float* __restrict__ x, T* __restrict__ y, int h, int w, int oh, int ow, int cp,
                                  long long total, bool round) {
  constexpr int V = std::is_same_v<T, float> ? 4 : 8;
  constexpr int CP = (4 * C + V - 1) / V * V;
  pdl_wait();
  RW_GRID_STRIDE(i, total) {
    const int ox = static_cast<int>(i % ow);
    const long long r = i / ow;
    const int oy = static_cast<int>(r % oh);
    const long long n = r / oh;
    float f[CP];
#pragma unroll
    for (int j = 0; j < CP; ++j) f[j] = 0.f;
    const int ix = 2 * ox;
#pragma unroll
    for (int c = 0; c < C; ++c) {
#pragma unroll
      for (int dy = 0; dy < 2; ++dy) {
        const int iy = 2 * oy + dy;
        if (iy >= h) continue;
        const float* row = x + ((n * C + c) * h + iy) * static_cast<long long>(w) + ix;
        if constexpr (PAIRS) {
          const float2 v = __ldg(reinterpret_cast<const float2*>(row));
          f[(dy * 2) * C + c] = v.x;
          f[(dy * 2 + 1) * C + c] = v.y;
        } else {
          f[(dy * 2) * C + c] = __ldg(row);
          if (ix + 1 < w) f[(dy * 2 + 1) * C + c] = __ldg(row + 1);
        }
      }
    }
    round_tf32_if(round, f);
    T* out = y + i * cp;
#pragma unroll
    for (int v = 0; v < CP; v += V) {
      float part[V];
#pragma unroll
      for (int j = 0; j < V; ++j) part[j] = f[v + j];
      store_vec<V>(out + v, part);
    }
    for (int v = CP; v < cp; v += V) {
      float zero[V] = {};
      store_vec<V>(out + v, zero);
    }
  }
}

template <typename T, bool PAIRS>
auto kernel_for(int c) {
  switch (c) {
    case 1: return to_nhwc_space_to_depth_kernel<T, 1, PAIRS>;
    case 2: return to_nhwc_space_to_depth_kernel<T, 2, PAIRS>;
    case 3: return to_nhwc_space_to_depth_kernel<T, 3, PAIRS>;
    default: return to_nhwc_space_to_depth_kernel<T, 4, PAIRS>;
  }
}

}  // namespace

void launch_to_nhwc_space_to_depth(NhwcStorage s, const float* x, void* y, int n, int c, int h, int w, int cp,
                                   cudaStream_t stream, bool round_tf32) {
  RW_EXPECTS(c >= 1 && c <= kSpaceToDepthMaxChannels && cp >= space_to_depth_channels(s, c) &&
                 cp % nhwc_chunk_channels(s) == 0,
             InvalidArgument, "to_nhwc_space_to_depth: {} channels into {} (1 to {} channels, into at least {})", c,
             cp, kSpaceToDepthMaxChannels, space_to_depth_channels(s, c));
  const int oh = (h + 1) / 2, ow = (w + 1) / 2;
  const long long total = static_cast<long long>(n) * oh * ow;
  if (total == 0) return;
  const bool round = round_tf32 && s == NhwcStorage::kF32;
  with_storage(s, [&](auto tag) {
    using T = decltype(tag);
    const auto kernel = w % 2 == 0 ? kernel_for<T, true>(c) : kernel_for<T, false>(c);
    (void)launch_kernel(kernel, grid_for(total, kThreads), kThreads, 0, stream, x, static_cast<T*>(y), h, w, oh, ow,
                        cp, total, round);
  });
  RW_CUDA_CHECK_LAUNCH("to_nhwc_space_to_depth");
}

}  // namespace redwood::cuda::kernels
