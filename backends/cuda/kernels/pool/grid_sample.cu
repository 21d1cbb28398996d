// GridSample over NCHW: one thread per output location (image, row, column), which computes the
// location's taps once and walks the channels. The location arithmetic is the reference
// kernel's, operation for operation, in float with explicit rounding (__f*_rn, no fused
// multiply-adds) so that the pixels picked (nearest, floor, reflection) are the CPU's; the
// weighted sums are in the same order.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/device_math.cuh"
#include "backends/cuda/kernels/launchers.hpp"
#include "backends/cuda/kernels/pdl.cuh"

#include <cstdint>

namespace redwood::cuda::kernels {
namespace {

// x reflected at lo and hi until it lies in [lo, hi] (lo when the range is empty).
__device__ float reflect(float x, float lo, float hi) {
  const float range = __fsub_rn(hi, lo);
  if (range <= 0.0f) return lo;
  if (x >= lo && x <= hi) return x;
  const bool below = x < lo;
  const double dx = below ? __dsub_rn(static_cast<double>(lo), static_cast<double>(x))
                          : __dsub_rn(static_cast<double>(x), static_cast<double>(hi));
  const double flips = floor(__ddiv_rn(dx, static_cast<double>(range)));
  const float r = static_cast<float>(__dsub_rn(dx, __dmul_rn(flips, static_cast<double>(range))));
  const bool even = fmod(flips, 2.0) == 0.0;
  const float v = below == even ? __fadd_rn(lo, r) : __fsub_rn(hi, r);
  return fminf(fmaxf(v, lo), hi);
}

// Keys' cubic convolution kernel at distance d (backends/cpu/reference/sampling.hpp).
__device__ double keys_cubic(double d, double a) {
  d = fabs(d);
  if (d <= 1) return __dadd_rn(__dmul_rn(__dmul_rn(__dsub_rn(__dmul_rn(a + 2, d), a + 3), d), d), 1.0);
  if (d < 2) {
    const double t = __dadd_rn(__dmul_rn(__dsub_rn(__dmul_rn(a, d), 5 * a), d), 8 * a);
    return __dsub_rn(__dmul_rn(t, d), 4 * a);
  }
  return 0;
}

// The pixels one axis of a location reads and their weights (0 for a tap outside the image with
// zeros padding).
struct AxisTaps {
  long long index[4];
  float weight[4];
  int count;
};

// The taps of normalized coordinate g along an axis of `size` pixels; false when g is NaN or
// infinite.
__device__ bool axis_taps(const GridSampleParams& p, float g, long long size, AxisTaps& t) {
  if (!isfinite(g)) return false;
  const float fsize = static_cast<float>(size);
  float v = p.align_corners ? __fmul_rn(__fdiv_rn(__fadd_rn(g, 1.0f), 2.0f), static_cast<float>(size - 1))
                            : __fdiv_rn(__fsub_rn(__fmul_rn(__fadd_rn(g, 1.0f), fsize), 1.0f), 2.0f);
  const float lo = p.align_corners ? 0.0f : -0.5f;
  const float hi = p.align_corners ? static_cast<float>(size - 1) : __fsub_rn(fsize, 0.5f);
  if (p.mode == GridSampleMode::kNearest) v = rintf(v);
  if (v < lo || v > hi) {
    if (p.padding == GridSamplePadding::kBorder) v = fminf(fmaxf(v, 0.0f), static_cast<float>(size - 1));
    if (p.padding == GridSamplePadding::kReflection) v = reflect(v, lo, hi);
    // zeros: every tap from 3 pixels outside on reads 0, so the location may stop there.
    if (p.padding == GridSamplePadding::kZeros) v = fminf(fmaxf(v, -4.0f), __fadd_rn(fsize, 3.0f));
  }
  auto tap = [&](int k, long long i, float weight) {
    if (p.padding == GridSamplePadding::kBorder) {
      i = i < 0 ? 0 : (i > size - 1 ? size - 1 : i);
    } else if (p.padding == GridSamplePadding::kReflection) {
      i = static_cast<long long>(reflect(static_cast<float>(i), lo, hi));
      i = i < 0 ? 0 : (i > size - 1 ? size - 1 : i);
    } else if (i < 0 || i >= size) {
      i = 0;
      weight = 0.0f;
    }
    t.index[k] = i;
    t.weight[k] = weight;
  };
  if (p.mode == GridSampleMode::kNearest) {
    t.count = 1;
    tap(0, static_cast<long long>(v), 1.0f);
    return true;
  }
  const float base = floorf(v);
  const float frac = __fsub_rn(v, base);
  const long long i0 = static_cast<long long>(base);
  if (p.mode == GridSampleMode::kBilinear) {
    t.count = 2;
    tap(0, i0, __fsub_rn(1.0f, frac));
    tap(1, i0 + 1, frac);
  } else {
    t.count = 4;
    for (int k = 0; k < 4; ++k) {
      tap(k, i0 - 1 + k, static_cast<float>(keys_cubic(static_cast<double>(frac) + 1.0 - k, -0.75)));
    }
  }
  return true;
}

__global__ void grid_sample_kernel(GridSampleParams p, const float* __restrict__ x, const float* __restrict__ grid,
                                   float* __restrict__ y, long long locations) {
  pdl_wait();
  pdl_launch_dependents();
  const long long plane = p.h * p.w, out_plane = p.ho * p.wo;
  RW_GRID_STRIDE(i, locations) {
    const long long b = i / out_plane;
    const long long at = i % out_plane;
    const float* g = grid + i * 2;
    float* out = y + b * p.c * out_plane + at;
    AxisTaps tx, ty;
    if (!axis_taps(p, g[0], p.w, tx) || !axis_taps(p, g[1], p.h, ty)) {
      for (long long ch = 0; ch < p.c; ++ch) out[ch * out_plane] = 0.0f;
      continue;
    }
    const float* image = x + b * p.c * plane;
    for (long long ch = 0; ch < p.c; ++ch) {
      const float* src = image + ch * plane;
      float sum = 0.0f;
      for (int ky = 0; ky < ty.count; ++ky) {
        if (ty.weight[ky] == 0.0f) continue;
        const float* row = src + ty.index[ky] * p.w;
        float acc = 0.0f;
        for (int kx = 0; kx < tx.count; ++kx) acc += tx.weight[kx] * row[tx.index[kx]];
        sum += ty.weight[ky] * acc;
      }
      out[ch * out_plane] = sum;
    }
  }
}

}  // namespace

void launch_grid_sample(const GridSampleParams& p, const float* x, const float* grid, float* y, cudaStream_t stream) {
  const long long locations = p.n * p.ho * p.wo;
  if (locations == 0 || p.c == 0) return;
  launch_kernel(grid_sample_kernel, grid_for(locations), 256, 0, stream, p, x, grid, y, locations);
  RW_CUDA_CHECK_LAUNCH("grid_sample");
}

}  // namespace redwood::cuda::kernels
