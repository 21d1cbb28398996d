// The tiled depthwise convolution (conv_depthwise.hpp). Memory-bound: the direct kernel
// (conv_kernels.cu) reads each input value R·S times through the cache and recomputes every
// index; here a block reads its input tile plus halo once, coalesced, into shared memory, and
// each thread slides a register window along W (128-bit shared-memory reads) for 4 outputs.
// Exact fp32 math at every precision: the layer moves bytes, not FLOPs.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/conv/conv_depthwise.hpp"
#include "backends/cuda/kernels/device_math.cuh"
#include "backends/cuda/kernels/pdl.cuh"

#include <algorithm>
#include <cstdint>

namespace redwood::cuda::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxSmem = 44 * 1024;  // plus 2 KiB of static in_base: within the 48 KiB default
constexpr int V = kDepthwiseVec;

// Floats of the register window one thread reads per input row: the inputs of V outputs,
// rounded up to whole float4s.
__host__ __device__ constexpr int window_floats(int s, int stride) { return ((V - 1) * stride + s + 3) / 4 * 4; }

// Block b: tile (b % tiles) of planes [(b / tiles)·tc, +tc), plane = image·K + output channel.
// Thread t: column group t % tx, row (t / tx) % ty, plane t / (tx·ty) of the block.
template <int R, int S, int STRIDE>
__global__ void __launch_bounds__(kThreads)
    conv_depthwise_tiled(ConvShape p, DepthwiseTiling t, const float* __restrict__ x, const float* __restrict__ w,
                         float* __restrict__ y, Epilogue e, bool vec_out) {
  constexpr int kWin = window_floats(S, STRIDE);
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  __shared__ long long in_base[kThreads];  // per plane of the block: offset of its input plane, -1 past the end

  const int tiles = t.xtiles * t.ytiles;
  const int tile = static_cast<int>(blockIdx.x % static_cast<unsigned>(tiles));
  const long long first_plane = static_cast<long long>(blockIdx.x / static_cast<unsigned>(tiles)) * t.tc;
  const int oy0 = (tile / t.xtiles) * t.ty;
  const int ox0 = (tile % t.xtiles) * t.tx * V;
  const int iy0 = oy0 * STRIDE - p.pad_h, ix0 = ox0 * STRIDE - p.pad_w;
  const long long planes = static_cast<long long>(p.n) * p.k;
  const int mult = p.k / p.groups;  // channel multiplier: output channel oc reads input channel oc / mult
  const long long in_plane = static_cast<long long>(p.h) * p.w;

  for (int c = threadIdx.x; c < t.tc; c += blockDim.x) {
    const long long plane = first_plane + c;
    if (plane < planes) {
      const long long image = plane / p.k;
      const int oc = static_cast<int>(plane - image * p.k);
      in_base[c] = (image * p.c + oc / mult) * in_plane;
    } else {
      in_base[c] = -1;
    }
  }
  __syncthreads();

  // The input tiles, zero outside the image (padding) and for planes past the end. Element i of
  // the tiles is (plane c, row r, column col); rather than dividing i at every step, the thread
  // divides its first i and the step once and carries col into r and r into c. kLoads loads are
  // issued before their stores, so that each thread has several in flight.
  constexpr int kLoads = 4;
  const int chan_elems = t.rows * t.pitch;
  const int total = t.tc * chan_elems;
  const int step = static_cast<int>(blockDim.x);
  const int step_c = step / chan_elems, step_r = (step % chan_elems) / t.pitch, step_col = step % t.pitch;
  pdl_wait();  // x may still be being written by the previous kernel (pdl.cuh)
  int c = static_cast<int>(threadIdx.x) / chan_elems;
  int r = (static_cast<int>(threadIdx.x) % chan_elems) / t.pitch;
  int col = static_cast<int>(threadIdx.x) % t.pitch;
  for (int i0 = threadIdx.x; i0 < total; i0 += kLoads * step) {
    float v[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int i = i0 + u * step;
      const int iy = iy0 + r, ix = ix0 + col;
      v[u] = 0.f;
      if (i < total) {  // then c < tc
        const long long base = in_base[c];
        if (base >= 0 && iy >= 0 && iy < p.h && ix >= 0 && ix < p.w) {
          v[u] = __ldg(x + base + static_cast<long long>(iy) * p.w + ix);
        }
      }
      col += step_col;  // both < pitch: at most one carry
      if (col >= t.pitch) {
        col -= t.pitch;
        ++r;
      }
      r += step_r;  // r ≤ rows and step_r < rows: at most one carry
      if (r >= t.rows) {
        r -= t.rows;
        ++c;
      }
      c += step_c;
    }
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      if (i0 + u * step < total) smem[i0 + u * step] = v[u];
    }
  }
  __syncthreads();
  pdl_launch_dependents();

  const int txi = static_cast<int>(threadIdx.x) % t.tx;
  const int tyi = (static_cast<int>(threadIdx.x) / t.tx) % t.ty;
  const int ci = static_cast<int>(threadIdx.x) / (t.tx * t.ty);
  if (ci >= t.tc) return;
  const long long plane = first_plane + ci;
  const int oy = oy0 + tyi, ox = ox0 + txi * V;
  if (plane >= planes || oy >= p.oh || ox >= p.ow) return;
  const int oc = static_cast<int>(plane % p.k);

  float wr[R * S];
#pragma unroll
  for (int i = 0; i < R * S; ++i) wr[i] = __ldg(w + static_cast<long long>(oc) * (R * S) + i);

  float acc[V];
#pragma unroll
  for (int v = 0; v < V; ++v) acc[v] = 0.f;
  // Offsets are multiples of 4 floats (pitch and V·STRIDE are), so the float4 reads are aligned;
  // the window ends within the row: txi·V·STRIDE + kWin ≤ pitch, tyi·STRIDE + R ≤ rows.
  const float* tile_in = smem + ci * chan_elems + tyi * STRIDE * t.pitch + txi * V * STRIDE;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float win[kWin];
    const float4* src = reinterpret_cast<const float4*>(tile_in + r * t.pitch);
#pragma unroll
    for (int q = 0; q < kWin / 4; ++q) {
      const float4 f = src[q];
      win[4 * q] = f.x;
      win[4 * q + 1] = f.y;
      win[4 * q + 2] = f.z;
      win[4 * q + 3] = f.w;
    }
#pragma unroll
    for (int v = 0; v < V; ++v) {
#pragma unroll
      for (int s = 0; s < S; ++s) acc[v] = fmaf(win[v * STRIDE + s], wr[r * S + s], acc[v]);
    }
  }

  const float bias = e.bias != nullptr ? __ldg(e.bias + oc) : 0.f;
  const long long out = (plane * p.oh + oy) * p.ow + ox;
  if (vec_out && ox + V <= p.ow) {
    // ow % 4 == 0 and 16-byte aligned y and residual (checked at launch): out is a multiple of 4.
    float4 res = make_float4(0.f, 0.f, 0.f, 0.f);
    if (e.residual != nullptr) res = __ldg(reinterpret_cast<const float4*>(e.residual + out));
    float4 o;
    o.x = activate(acc[0] + bias + res.x, e.act, e.alpha, e.beta);
    o.y = activate(acc[1] + bias + res.y, e.act, e.alpha, e.beta);
    o.z = activate(acc[2] + bias + res.z, e.act, e.alpha, e.beta);
    o.w = activate(acc[3] + bias + res.w, e.act, e.alpha, e.beta);
    *reinterpret_cast<float4*>(y + out) = o;
    return;
  }
#pragma unroll
  for (int v = 0; v < V; ++v) {
    if (ox + v < p.ow) {
      float a = acc[v] + bias;
      if (e.residual != nullptr) a += __ldg(e.residual + out + v);
      y[out + v] = activate(a, e.act, e.alpha, e.beta);
    }
  }
}

int div_up(long long a, long long b) { return static_cast<int>((a + b - 1) / b); }

using Kernel = void (*)(ConvShape, DepthwiseTiling, const float*, const float*, float*, Epilogue, bool);

template <int R> Kernel pick_stride(int stride) {
  return stride == 1 ? conv_depthwise_tiled<R, R, 1> : conv_depthwise_tiled<R, R, 2>;
}

Kernel pick(const ConvShape& p) {
  switch (p.r) {
    case 3: return pick_stride<3>(p.stride_h);
    case 5: return pick_stride<5>(p.stride_h);
    default: return pick_stride<7>(p.stride_h);
  }
}

}  // namespace

DepthwiseTiling depthwise_tiling(const ConvShape& p) {
  DepthwiseTiling t;
  const bool depthwise = p.groups > 0 && p.c == p.groups && p.k % p.groups == 0;
  const bool window = p.r == p.s && (p.r == 3 || p.r == 5 || p.r == 7);
  const bool stride = p.stride_h == p.stride_w && (p.stride_h == 1 || p.stride_h == 2);
  const bool dilation = p.dil_h == 1 && p.dil_w == 1;
  if (!depthwise || !window || !stride || !dilation || p.n <= 0 || p.k <= 0 || p.oh <= 0 || p.ow <= 0) return t;
  const int st = p.stride_h;
  // W: nearly equal tiles of at most 16 threads (64 outputs); H: of at most 256 / tx rows.
  const int groups_w = div_up(p.ow, V);
  t.xtiles = div_up(groups_w, 16);
  t.tx = div_up(groups_w, t.xtiles);
  const int ty_max = kThreads / t.tx;
  t.ytiles = div_up(p.oh, ty_max);
  t.ty = div_up(p.oh, t.ytiles);
  t.rows = (t.ty - 1) * st + p.r;
  t.pitch = (t.tx - 1) * V * st + window_floats(p.s, st);
  const int plane_bytes = t.rows * t.pitch * static_cast<int>(sizeof(float));
  const long long planes = static_cast<long long>(p.n) * p.k;
  // The other threads of the block take more planes, as far as shared memory allows.
  t.tc = static_cast<int>(std::min<long long>({kThreads / (t.tx * t.ty), kMaxSmem / plane_bytes, planes}));
  if (t.tc < 1) return t;  // one plane's tile does not fit
  t.smem_bytes = t.tc * plane_bytes;
  t.blocks = (planes + t.tc - 1) / t.tc * t.xtiles * t.ytiles;
  t.ok = t.blocks < (1LL << 31) - 1;
  return t;
}

void launch_conv_depthwise_tiled(const ConvShape& p, const DepthwiseTiling& t, const float* x, const float* w,
                                 float* y, const Epilogue& e, cudaStream_t stream) {
  if (!t.ok || t.blocks == 0) return;
  auto aligned = [](const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; };
  const bool vec_out = p.ow % V == 0 && aligned(y) && (e.residual == nullptr || aligned(e.residual));
  launch_kernel(pick(p), static_cast<unsigned>(t.blocks), t.tx * t.ty * t.tc, t.smem_bytes, stream, p, t, x, w, y, e,
                vec_out);
  RW_CUDA_CHECK_LAUNCH("conv_depthwise_tiled");
}

}  // namespace redwood::cuda::kernels
