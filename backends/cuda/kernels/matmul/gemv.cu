// Matrix-vector products of a few rows (gemv.hpp), exact fp32, the fused epilogue of matmul.cu's
// store(). Three kernels, by the weight axis that is contiguous in memory (so that a warp's loads of
// W are always coalesced) and by the row count:
//
// - gemv_k (W contiguous along k: a convolution's [N][C] weights, Gemm's transB; at most
//   kGemvWarpRows rows): a warp per output column. Lane l sums k = l, l+32, ... (or, with 16-byte
//   loads, k = 4l..4l+3, +128, ...) for all R rows at once, so each weight is read once; a
//   butterfly of shuffles adds the 32 lanes.
// - gemv_wide (W not contiguous along n, kGemvWarpRows < rows <= kGemvMaxRows: a classifier or the
//   squeeze-excite layers at batch 32): a lane's x values stay in registers and serve several
//   columns. k is cut into slices of 128; warp j of a block takes slices j, j + warps, ... and lane
//   l holds x(r, k) for its 4 k of the slice and all R rows (4R registers). For each of the
//   block's columns it loads its 4 weights, forms R partial sums, and a transposing reduction (31
//   shuffles for 32 rows, not 32·5; each lane's rows in an order permuted by its lane number, so
//   that no lane chooses what to send) leaves row l's sum of the slice in lane l. The warps' sums are
//   added in warp order through shared memory. Reading x costs 4R loads a lane a slice for up to
//   kWideCols columns, not 4R a column, which with 32 rows would bound the kernel.
// - gemv_n (W contiguous along n: MatMul's [K][N], Gemm without transB): a thread per output
//   column, 32 columns a block; the block's 8 warps take every 8th k, and warp r adds the 8
//   partial sums of row r (r, r + 8, ... with more than 8 rows) in warp order.
//
// A (a few rows) is read through the L1 cache; it is small next to W. Rows past p.rows of a kernel
// built for R rows (gemv_wide and gemv_n round 9..32 rows up to 16 or 32) repeat the last row: their
// sums are computed and never stored.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/device_math.cuh"
#include "backends/cuda/kernels/matmul/gemv.hpp"
#include "backends/cuda/kernels/pdl.cuh"

#include <cstdint>
#include <stdexcept>
#include <string>

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
  y[idx] = product_epilogue(acc, p.alpha, p.beta, p.c != nullptr ? p.c + (m * p.c_m + n * p.c_n) : nullptr, p.epilogue,
                            n, idx);
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
// warp j sums k = j, j + 8, ...; warp r then adds the 8 partial sums of rows r, r + 8, ... in warp
// order. R ≥ p.rows (rows past p.rows repeat the last one and are not stored).
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
    for (int r = 0; r < R; ++r) rows[r] = a_row(p, min(r, p.rows - 1));
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
  if (!inside) return;
  for (int r = warp; r < p.rows; r += kWarps) {
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < kWarps; ++j) s += part[j][r][lane];
    store(p, y, r, n, s);
  }
}

// gemv_wide (top of the file): x stays in registers, kWideCols columns a block at most.
constexpr int kSlice = 128, kWideCols = 8;
// Column counts per block are picked so that a launch has at least about this many blocks (the
// H200 has 132 multiprocessors), fewer columns a block when n is small: every block reads all of x,
// so more blocks than that would only read x more often.
constexpr long long kWideTargetBlocks = 100;

// One halving step of transpose_sum (h = H, then H/2 .. 1 recursively). A template recursion, not
// a loop, so that it unrolls and v stays in registers.
template <int R, int H>
__device__ __forceinline__ void halve(float (&v)[R]) {
  if constexpr (H >= 1) {
#pragma unroll
    for (int i = 0; i < H; ++i) v[i] += __shfl_xor_sync(kFullMask, v[i + H], H);
    halve<R, H / 2>(v);
  }
}

// Lane l holds in v[p] (p < R, R a power of two ≤ 32) its partial sum of row p ^ (l % R): each
// lane's rows in an order permuted by its lane number. Returns the sum over the warp's 32 lanes of
// row l % R, in a fixed order. Halving steps h = R/2 .. 1: a lane keeps v[p] (p < h, row p ^ l',
// whose bit h is l's) and adds the partner's (lane l ^ h) v[p + h], which is row (p + h) ^ (l' ^ h)
// = p ^ l' too; with that order no lane needs to choose what to send. Then butterfly steps
// (h = R .. 16) add the lanes that hold the same row. 31 shuffles and adds for 32 rows, not 32·5.
template <int R>
__device__ __forceinline__ float transpose_sum(float (&v)[R]) {
  static_assert(R >= 1 && R <= 32 && (R & (R - 1)) == 0, "R: a power of two up to 32");
  halve<R, R / 2>(v);
  float s = v[0];
#pragma unroll
  for (int h = R; h < 32; h *= 2) s += __shfl_xor_sync(kFullMask, s, h);
  return s;
}

// Block: `cols` (≤ kWideCols) consecutive columns from blockIdx.x · cols, blockDim.x / 32 warps
// (≤ kWarps) over the slices of k. Lane l's k of a slice s: s·128 + 4l + j (kWVec: W contiguous
// along k, k % 4 == 0, w_n % 4 == 0 and w 16-byte aligned: one 16-byte load) or s·128 + l + 32j
// (coalesced 4-byte loads), j < 4. kAVec (with kWVec): A's rows 16-byte loads too.
template <int R, bool kWVec, bool kAVec>
__global__ void __launch_bounds__(kThreads) gemv_wide(const __grid_constant__ GemvParams p, const float* __restrict__ a,
                                                      const float* __restrict__ w, float* __restrict__ y, int cols) {
  __shared__ float part[kWarps][kWideCols][32];
  __shared__ long long row_offset[R];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const int lane_rows = lane % R;  // xv[p] holds row p ^ lane_rows (transpose_sum)
  const long long n0 = static_cast<long long>(blockIdx.x) * cols;
  // Index math and, for weights no kernel writes, the block's rows of W towards L2, while the
  // previous kernel finishes (pdl.cuh): 128-byte lines, spread over the block's threads.
  if (threadIdx.x < R) row_offset[threadIdx.x] = a_row(p, min(static_cast<int>(threadIdx.x), p.rows - 1));
  if (p.w_constant && p.w_k == 1) {
    const long long bytes = static_cast<long long>(p.k) * static_cast<long long>(sizeof(float));
    for (int c = 0; c < cols && n0 + c < p.n; ++c) {
      const char* row = reinterpret_cast<const char*>(w + (n0 + c) * p.w_n);
      for (long long off = threadIdx.x * 128LL; off < bytes; off += blockDim.x * 128LL) {
        asm volatile("prefetch.global.L2 [%0];\n" ::"l"(row + off));
      }
    }
  }
  __syncthreads();
  pdl_wait();
  pdl_launch_dependents();
  float acc[kWideCols];
#pragma unroll
  for (int c = 0; c < kWideCols; ++c) acc[c] = 0.f;
  const int slices = (p.k + kSlice - 1) / kSlice;
  for (int s = warp; s < slices; s += warps) {
    // x(r, k) for this lane's 4 k and every row, row p ^ (lane % R) in xv[p] (transpose_sum's
    // order; the permuted index goes to shared memory, never to a register array); zero past k
    // (then W is zero there too).
    float xv[R][4];
    float wv[kWideCols][4];
    if constexpr (kWVec) {
      const int k = s * kSlice + 4 * lane;
      const bool in = k < p.k;  // k % 4 == 0: all four or none
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if constexpr (kAVec) {
          const float4 v = in ? *reinterpret_cast<const float4*>(a + row_offset[r ^ lane_rows] + k)
                              : make_float4(0.f, 0.f, 0.f, 0.f);
          xv[r][0] = v.x;
          xv[r][1] = v.y;
          xv[r][2] = v.z;
          xv[r][3] = v.w;
        } else {
          const float* ar = a + row_offset[r ^ lane_rows] + k * p.a_k;
#pragma unroll
          for (int j = 0; j < 4; ++j) xv[r][j] = in ? ar[j * p.a_k] : 0.f;
        }
      }
#pragma unroll
      for (int c = 0; c < kWideCols; ++c) {
        const long long n = n0 + c;
        const float4 v = in && c < cols && n < p.n ? *reinterpret_cast<const float4*>(w + n * p.w_n + k)
                                                   : make_float4(0.f, 0.f, 0.f, 0.f);
        wv[c][0] = v.x;
        wv[c][1] = v.y;
        wv[c][2] = v.z;
        wv[c][3] = v.w;
      }
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int k = s * kSlice + lane + 32 * j;
        const bool in = k < p.k;
#pragma unroll
        for (int r = 0; r < R; ++r) xv[r][j] = in ? a[row_offset[r ^ lane_rows] + k * p.a_k] : 0.f;
#pragma unroll
        for (int c = 0; c < kWideCols; ++c) {
          const long long n = n0 + c;
          wv[c][j] = in && c < cols && n < p.n ? w[n * p.w_n + k * p.w_k] : 0.f;
        }
      }
    }
#pragma unroll
    for (int c = 0; c < kWideCols; ++c) {
      if (c < cols && n0 + c < p.n) {  // the same for the whole warp: the shuffles are safe
        float v[R];
#pragma unroll
        for (int r = 0; r < R; ++r) {
          float t = 0.f;
#pragma unroll
          for (int j = 0; j < 4; ++j) t = fmaf(xv[r][j], wv[c][j], t);
          v[r] = t;
        }
        acc[c] += transpose_sum<R>(v);  // lane l: row l % R, slices in order
      }
    }
  }
#pragma unroll
  for (int c = 0; c < kWideCols; ++c) part[warp][c][lane] = acc[c];
  __syncthreads();
  // Thread t stores row t / cols of column t % cols (consecutive threads, consecutive columns).
  for (int t = threadIdx.x; t < p.rows * cols; t += blockDim.x) {
    const int r = t / cols, c = t % cols;
    const long long n = n0 + c;
    if (n >= p.n) continue;
    float sum = 0.f;
    for (int j = 0; j < warps; ++j) sum += part[j][c][r];
    store(p, y, r, n, sum);
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

// 9..32 rows (R = 16 or 32, rows ≤ R): gemv_n where W is contiguous along n, else gemv_wide.
template <int R>
void go_wide(const GemvParams& p, const float* a, const float* w, float* y, cudaStream_t stream) {
  if (p.w_n == 1 && p.w_k != 1) {
    const unsigned blocks = static_cast<unsigned>((static_cast<long long>(p.n) + 31) / 32);
    launch_kernel(gemv_n<R>, blocks, kThreads, 0, stream, p, a, w, y);
    RW_CUDA_CHECK_LAUNCH("gemv_n");
    return;
  }
  int cols = kWideCols;
  while (cols > 1 && (p.n + cols - 1) / cols < kWideTargetBlocks) cols /= 2;
  const unsigned blocks = static_cast<unsigned>((static_cast<long long>(p.n) + cols - 1) / cols);
  const int slices = (p.k + kSlice - 1) / kSlice;
  const unsigned threads = 32u * static_cast<unsigned>(slices < 1 ? 1 : (slices < kWarps ? slices : kWarps));
  if (p.w_k == 1 && p.k % 4 == 0 && p.w_n % 4 == 0 && aligned16(w)) {
    if (a_rows_vectorizable(p, a)) {
      launch_kernel(gemv_wide<R, true, true>, blocks, threads, 0, stream, p, a, w, y, cols);
    } else {
      launch_kernel(gemv_wide<R, true, false>, blocks, threads, 0, stream, p, a, w, y, cols);
    }
  } else {
    launch_kernel(gemv_wide<R, false, false>, blocks, threads, 0, stream, p, a, w, y, cols);
  }
  RW_CUDA_CHECK_LAUNCH("gemv_wide");
}

}  // namespace

void launch_gemv(const GemvParams& p, const float* a, const float* w, float* y, cudaStream_t stream) {
  if (p.rows < 0 || p.rows > kGemvMaxRows) {
    throw std::invalid_argument("launch_gemv: rows must be 0 to " + std::to_string(kGemvMaxRows) + ", not " +
                                std::to_string(p.rows));
  }
  if (p.rows == 0 || p.n <= 0) return;
  if (p.rows > kGemvWarpRows) {
    if (p.rows <= 16) {
      go_wide<16>(p, a, w, y, stream);
    } else {
      go_wide<32>(p, a, w, y, stream);
    }
    return;
  }
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
