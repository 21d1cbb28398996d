// Pooling (2-D max/average windows, global mean/max) and Resize (nearest, bilinear) over NCHW.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/device_math.cuh"
#include "backends/cuda/kernels/launchers.hpp"
#include "backends/cuda/kernels/pdl.cuh"

#include <cstdint>

#include <cfloat>

namespace redwood::cuda::kernels {
namespace {

__global__ void pool2d_kernel(PoolParams p, const float* __restrict__ x, float* __restrict__ y, long long total) {
  pdl_wait();
  pdl_launch_dependents();
  RW_GRID_STRIDE(i, total) {
    const int ox = static_cast<int>(i % p.ow);
    const int oy = static_cast<int>((i / p.ow) % p.oh);
    const long long plane = i / (static_cast<long long>(p.ow) * p.oh);
    const float* xp = x + plane * p.h * p.w;
    float acc = p.max ? -FLT_MAX : 0.f;
    int count = 0, padded = 0;
    bool any = false;
    for (int ky = 0; ky < p.kh; ++ky) {
      const int iy = oy * p.sh - p.ph + ky * p.dh;
      for (int kx = 0; kx < p.kw; ++kx) {
        const int ix = ox * p.sw - p.pw + kx * p.dw;
        // Window positions inside the padded input count for count_include_pad.
        if (iy >= -p.ph && iy < p.h + p.pad_end_h && ix >= -p.pw && ix < p.w + p.pad_end_w) ++padded;
        if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) continue;
        const float v = __ldg(xp + iy * p.w + ix);
        if (p.max) {
          acc = any ? fmaxf(acc, v) : v;
        } else {
          acc += v;
        }
        any = true;
        ++count;
      }
    }
    if (!p.max) acc = acc / static_cast<float>(p.count_include_pad ? padded : (count > 0 ? count : 1));
    y[i] = acc;
  }
}

// One warp per row.
__global__ void global_pool_kernel(const float* __restrict__ x, float* __restrict__ y, long long rows, long long inner,
                                   bool max) {
  pdl_wait();
  pdl_launch_dependents();
  const long long warp = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= rows) return;
  const float* xp = x + warp * inner;
  float acc = max ? -FLT_MAX : 0.f;
  for (long long j = lane; j < inner; j += 32) acc = max ? fmaxf(acc, xp[j]) : acc + xp[j];
  for (int off = 16; off > 0; off /= 2) {
    const float o = __shfl_down_sync(0xffffffffu, acc, off);
    acc = max ? fmaxf(acc, o) : acc + o;
  }
  if (lane == 0) y[warp] = max ? acc : acc / static_cast<float>(inner);
}

__host__ __device__ __forceinline__ float source_coord(ResizeCoord mode, int x, float scale, int in, int out) {
  switch (mode) {
    case ResizeCoord::kHalfPixel: return (x + 0.5f) / scale - 0.5f;
    case ResizeCoord::kPytorchHalfPixel: return out > 1 ? (x + 0.5f) / scale - 0.5f : 0.f;
    case ResizeCoord::kAlignCorners: return out == 1 ? 0.f : x * static_cast<float>(in - 1) / static_cast<float>(out - 1);
    case ResizeCoord::kAsymmetric: return x / scale;
    case ResizeCoord::kTfHalfPixelForNn: return (x + 0.5f) / scale;
  }
  return 0.f;
}

__host__ __device__ __forceinline__ int nearest_index(ResizeNearest mode, float c, int in) {
  int i;
  switch (mode) {
    case ResizeNearest::kRoundPreferFloor: i = (c == floorf(c) + 0.5f) ? static_cast<int>(floorf(c)) : static_cast<int>(roundf(c)); break;
    case ResizeNearest::kRoundPreferCeil: i = static_cast<int>(floorf(c + 0.5f)); break;
    case ResizeNearest::kFloor: i = static_cast<int>(floorf(c)); break;
    default: i = static_cast<int>(ceilf(c)); break;
  }
  return i < 0 ? 0 : (i > in - 1 ? in - 1 : i);
}

// Nearest upsampling by whole factors whose every output takes input o / factor (checked on the
// host against source_coord and nearest_index, whatever the modes): one thread per input value
// writes its fh x fw block, with no per-output coordinate arithmetic.
__global__ void resize_nearest_blocks(const float* __restrict__ x, float* __restrict__ y, long long inputs, int h, int w,
                                      int fh, int fw) {
  pdl_wait();
  pdl_launch_dependents();
  const int ow = w * fw;
  RW_GRID_STRIDE(i, inputs) {
    const int ix = static_cast<int>(i % w);
    const long long row = i / w;  // plane · h + iy
    const float v = x[i];
    float* out = y + row * fh * ow + static_cast<long long>(ix) * fw;
    for (int dy = 0; dy < fh; ++dy) {
      if (fw == 2) {
        *reinterpret_cast<float2*>(out + static_cast<long long>(dy) * ow) = make_float2(v, v);
      } else {
        for (int dx = 0; dx < fw; ++dx) out[static_cast<long long>(dy) * ow + dx] = v;
      }
    }
  }
}

// Whether every output of one axis takes input o / factor.
bool takes_o_over_factor(ResizeNearest nearest, ResizeCoord coord, float scale, int in, int out) {
  if (out % in != 0) return false;
  const int factor = out / in;
  for (int o = 0; o < out; ++o) {
    if (nearest_index(nearest, source_coord(coord, o, scale, in, out), in) != o / factor) return false;
  }
  return true;
}

__global__ void resize_kernel(ResizeParams p, const float* __restrict__ x, float* __restrict__ y, long long total) {
  pdl_wait();
  pdl_launch_dependents();
  RW_GRID_STRIDE(i, total) {
    const int ox = static_cast<int>(i % p.ow);
    const int oy = static_cast<int>((i / p.ow) % p.oh);
    const long long plane = i / (static_cast<long long>(p.ow) * p.oh);
    const float* xp = x + plane * p.h * p.w;
    const float cy = source_coord(p.coord, oy, p.scale_h, p.h, p.oh);
    const float cx = source_coord(p.coord, ox, p.scale_w, p.w, p.ow);
    if (p.mode == ResizeMode::kNearest) {
      y[i] = xp[nearest_index(p.nearest, cy, p.h) * p.w + nearest_index(p.nearest, cx, p.w)];
      continue;
    }
    const float fy = fminf(fmaxf(cy, 0.f), static_cast<float>(p.h - 1));
    const float fx = fminf(fmaxf(cx, 0.f), static_cast<float>(p.w - 1));
    const int y0 = static_cast<int>(floorf(fy)), x0 = static_cast<int>(floorf(fx));
    const int y1 = min(y0 + 1, p.h - 1), x1 = min(x0 + 1, p.w - 1);
    const float ly = fy - y0, lx = fx - x0;
    const float top = xp[y0 * p.w + x0] * (1.f - lx) + xp[y0 * p.w + x1] * lx;
    const float bottom = xp[y1 * p.w + x0] * (1.f - lx) + xp[y1 * p.w + x1] * lx;
    y[i] = top * (1.f - ly) + bottom * ly;
  }
}

}  // namespace

void launch_pool2d(const PoolParams& p, const float* x, float* y, cudaStream_t stream) {
  const long long total = static_cast<long long>(p.n) * p.c * p.oh * p.ow;
  if (total == 0) return;
  launch_kernel(pool2d_kernel, grid_for(total), 256, 0, stream, p, x, y, total);
  RW_CUDA_CHECK_LAUNCH("pool2d");
}

void launch_global_pool(const float* x, float* y, long long rows, long long inner, bool max, cudaStream_t stream) {
  if (rows == 0) return;
  const long long threads = rows * 32;
  launch_kernel(global_pool_kernel, static_cast<unsigned>((threads + 255) / 256), 256, 0, stream, x, y, rows, inner,
                max);
  RW_CUDA_CHECK_LAUNCH("global_pool");
}

void launch_resize(const ResizeParams& p, const float* x, float* y, cudaStream_t stream) {
  const long long total = p.planes * p.oh * p.ow;
  if (total == 0) return;
  if (p.mode == ResizeMode::kNearest && takes_o_over_factor(p.nearest, p.coord, p.scale_h, p.h, p.oh) &&
      takes_o_over_factor(p.nearest, p.coord, p.scale_w, p.w, p.ow) &&
      (p.ow / p.w != 2 || reinterpret_cast<std::uintptr_t>(y) % 8 == 0)) {
    const long long inputs = p.planes * p.h * p.w;
    launch_kernel(resize_nearest_blocks, grid_for(inputs), 256, 0, stream, x, y, inputs, p.h, p.w, p.oh / p.h, p.ow / p.w);
    RW_CUDA_CHECK_LAUNCH("resize_nearest_blocks");
    return;
  }
  launch_kernel(resize_kernel, grid_for(total), 256, 0, stream, p, x, y, total);
  RW_CUDA_CHECK_LAUNCH("resize");
}

}  // namespace redwood::cuda::kernels
