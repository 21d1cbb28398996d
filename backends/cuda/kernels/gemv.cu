// Matrix-vector products of a few rows (gemv.hpp), exact fp32, the fused epilogue of matmul.cu's
// store(). Two kernels, by the weight axis that is contiguous in memory, so that a warp's loads of
// W are always coalesced:
//
// - gemv_k (W contiguous along k: a convolution's [N][C] weights, Gemm's transB): a warp per output
//   column. Lane l sums k = l, l+32, ... (or, with 16-byte loads, k = 4l..4l+3, +128, ...) for
//   all R rows at once, so each weight is read once; a butterfly of shuffles adds the 32 lanes.
// - gemv_n (W contiguous along n: MatMul's [K][N], Gemm without transB): a thread per output
//   column, 32 columns a block; the block's 8 warps take every 8th k, and warp r adds the 8
//   partial sums of row r in warp order.
//
// A (a few rows) is read through the L1 cache by every warp; it is small next to W.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/device_math.cuh"
#include "backends/cuda/kernels/gemv.hpp"
#include "backends/cuda/kernels/pdl.cuh"

#include <cstdint>
#include <stdexcept>

namespace redwood::cuda::kernels {
namespace {

constexpr int kWarps = 8, kThreads = kWarps * 32;
constexpr unsigned kFullMask = 0xffffffffu;

// The offset of row m's first element in A.
__device__ __forceinline__ long long a_row(const GemvParams& p, int m) {
  return (m / p.a_group) * p.a_group_stride + (m % p.a_group) * p.a_m;
}

// Y(m, n) = act(alpha · acc + beta · C(m, n) + bias[n] + residual(m, n)), as matmul.cu's store().
__device__ __forceinline__ void store(const GemvParams& p, float* y, int m, long long n, float acc) {
  const long long idx = (m / p.y_group) * p.y_group_stride + (m % p.y_group) * p.y_m + n * p.y_n;
  float v = p.alpha * acc;
  if (p.c != nullptr) v += p.beta * p.c[m * p.c_m + n * p.c_n];
  const Epilogue& e = p.epilogue;
  if (e.bias != nullptr) v += e.bias[n];
  if (e.residual != nullptr) v += e.residual[idx];
  y[idx] = activate(v, e.act, e.alpha, e.beta);
}

// A warp per column n. kVec: w_k == 1, k % 4 == 0, w_n % 4 == 0 and w 16-byte aligned, so
// w + n·w_n + k is 16-byte aligned for every k that is a multiple of 4. kAVec (with kVec): A too
// (a_k == 1, a 16-byte aligned, every row's offset a multiple of 4), one load for four k of a
// row instead of four: with 8 rows the loads of A, not of W, would otherwise bound the kernel.
template <int R, bool kVec, bool kAVec>
__global__ void __launch_bounds__(kThreads) gemv_k(const __grid_constant__ GemvParams p, const float* __restrict__ a,
                                                   const float* __restrict__ w, float* __restrict__ y) {
  const int lane = threadIdx.x % 32;
  const long long n = static_cast<long long>(blockIdx.x) * kWarps + threadIdx.x / 32;
  // Weights that no kernel writes start towards L2 while the previous kernel finishes: 128-byte
  // lines of this warp's column, a lane every 32nd line.
  if (p.w_constant && n < p.n) {
    const char* row = reinterpret_cast<const char*>(w + n * p.w_n);
    const long long bytes = static_cast<long long>(p.k) * p.w_k * static_cast<long long>(sizeof(float));
    for (long long off = lane * 128LL; off < bytes; off += 32 * 128LL) {
      asm volatile("prefetch.global.L2 [%0];\n" ::"l"(row + off));
    }
  }
  pdl_wait();
  pdl_launch_dependents();
  if (n >= p.n) return;  // the whole warp: n is the same for its 32 lanes
  long long rows[R];
#pragma unroll
  for (int r = 0; r < R; ++r) rows[r] = a_row(p, r);
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.f;
  const float* wn = w + n * p.w_n;
  if constexpr (kVec) {
    // Four iterations' loads in flight; not with many rows of strided A, whose 16 scalar loads
    // an iteration a row would then take all the registers.
    constexpr int kUnroll = kAVec || R <= 2 ? 4 : 1;
#pragma unroll kUnroll
    for (int k = lane * 4; k < p.k; k += 32 * 4) {
      const float4 wv = *reinterpret_cast<const float4*>(wn + k);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if constexpr (kAVec) {
          const float4 av = *reinterpret_cast<const float4*>(a + rows[r] + k);
          acc[r] = fmaf(av.x, wv.x, acc[r]);
          acc[r] = fmaf(av.y, wv.y, acc[r]);
          acc[r] = fmaf(av.z, wv.z, acc[r]);
          acc[r] = fmaf(av.w, wv.w, acc[r]);
        } else {
          const float* ar = a + rows[r] + k * p.a_k;
          acc[r] = fmaf(ar[0], wv.x, acc[r]);
          acc[r] = fmaf(ar[p.a_k], wv.y, acc[r]);
          acc[r] = fmaf(ar[2 * p.a_k], wv.z, acc[r]);
          acc[r] = fmaf(ar[3 * p.a_k], wv.w, acc[r]);
        }
      }
    }
  } else {
#pragma unroll 4
    for (int k = lane; k < p.k; k += 32) {
      const float wv = wn[k * p.w_k];
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r] = fmaf(a[rows[r] + k * p.a_k], wv, acc[r]);
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int off = 16; off > 0; off /= 2) acc[r] += __shfl_xor_sync(kFullMask, acc[r], off);
  }
  // Every lane holds every row's sum; lane r stores row r.
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (lane == r) store(p, y, r, n, acc[r]);
  }
}

// A thread per column n (32 a block, consecutive lanes on consecutive n: coalesced when w_n == 1);
// warp j sums k = j, j + 8, ...; warp r < R then adds row r's 8 partial sums in warp order.
template <int R>
__global__ void __launch_bounds__(kThreads) gemv_n(const __grid_constant__ GemvParams p, const float* __restrict__ a,
                                                   const float* __restrict__ w, float* __restrict__ y) {
  __shared__ float part[kWarps][R][32];
  pdl_wait();
  pdl_launch_dependents();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const long long n = static_cast<long long>(blockIdx.x) * 32 + lane;
  const bool inside = n < p.n;
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.f;
  if (inside) {
    long long rows[R];
#pragma unroll
    for (int r = 0; r < R; ++r) rows[r] = a_row(p, r);
    const float* wn = w + n * p.w_n;
#pragma unroll 4
    for (int k = warp; k < p.k; k += kWarps) {
      const float wv = wn[k * p.w_k];
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r] = fmaf(a[rows[r] + k * p.a_k], wv, acc[r]);
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) part[warp][r][lane] = acc[r];
  __syncthreads();
  if (warp < R && inside) {
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < kWarps; ++j) s += part[j][warp][lane];
    store(p, y, warp, n, s);
  }
}

bool aligned16(const float* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; }

// A's rows can be read 16 bytes at a time along k (given k % 4 == 0).
bool a_rows_vectorizable(const GemvParams& p, const float* a) {
  if (p.a_k != 1 || !aligned16(a)) return false;
  for (int m = 0; m < p.rows; ++m) {
    if (((m / p.a_group) * p.a_group_stride + (m % p.a_group) * p.a_m) % 4 != 0) return false;
  }
  return true;
}

template <int R>
void go(const GemvParams& p, const float* a, const float* w, float* y, cudaStream_t stream) {
  if (p.w_n == 1 && p.w_k != 1) {
    const unsigned blocks = static_cast<unsigned>((static_cast<long long>(p.n) + 31) / 32);
    launch_kernel(gemv_n<R>, blocks, kThreads, 0, stream, p, a, w, y);
    RW_CUDA_CHECK_LAUNCH("gemv_n");
    return;
  }
  const unsigned blocks = static_cast<unsigned>((static_cast<long long>(p.n) + kWarps - 1) / kWarps);
  if (p.w_k == 1 && p.k % 4 == 0 && p.w_n % 4 == 0 && aligned16(w)) {
    if (a_rows_vectorizable(p, a)) {
      launch_kernel(gemv_k<R, true, true>, blocks, kThreads, 0, stream, p, a, w, y);
    } else {
      launch_kernel(gemv_k<R, true, false>, blocks, kThreads, 0, stream, p, a, w, y);
    }
  } else {
    launch_kernel(gemv_k<R, false, false>, blocks, kThreads, 0, stream, p, a, w, y);
  }
  RW_CUDA_CHECK_LAUNCH("gemv_k");
}

}  // namespace

void launch_gemv(const GemvParams& p, const float* a, const float* w, float* y, cudaStream_t stream) {
  if (p.rows < 0 || p.rows > kGemvMaxRows) throw std::invalid_argument("launch_gemv: rows must be 0 to 8");
  if (p.rows == 0 || p.n <= 0) return;
  switch (p.rows) {
    case 1: go<1>(p, a, w, y, stream); break;
    case 2: go<2>(p, a, w, y, stream); break;
    case 3: go<3>(p, a, w, y, stream); break;
    case 4: go<4>(p, a, w, y, stream); break;
    case 5: go<5>(p, a, w, y, stream); break;
    case 6: go<6>(p, a, w, y, stream); break;
    case 7: go<7>(p, a, w, y, stream); break;
    default: go<8>(p, a, w, y, stream); break;
  }
}

}  // namespace redwood::cuda::kernels
