// TopK: one block per row (grid-stride over rows). Each element of a row becomes a unique 64-bit
// key, its value's rank in the high word and the complement of its position in the low word, so
// that "ranks first" (better value, then lower position) is "larger key". A radix select over the
// key's eight bytes (a 256-bin histogram per byte) finds the k-th largest key; the k keys at or
// above it are gathered into shared memory, sorted there with a bitonic sort, and written out
// with the values read back at their positions.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/device_math.cuh"
#include "backends/cuda/kernels/launchers.hpp"
#include "backends/cuda/kernels/pdl.cuh"

#include <cstdint>

namespace redwood::cuda::kernels {
namespace {

constexpr int kThreads = 256;

/// The key of value v at position l (l < 2^32 - 1, so the low word is never 0): the high word
/// orders the values (largest first, or smallest first) with every NaN equal and ranked above
/// every number, -0 equal to +0; the low word prefers lower positions.
__device__ __forceinline__ unsigned long long top_k_key(float v, long long l, bool largest) {
  unsigned int bits;
  if (isnan(v)) {
    bits = 0xFFFFFFFFu;
  } else {
    const unsigned int u = __float_as_uint(v == 0.f ? 0.f : v);
    bits = (u & 0x80000000u) != 0 ? ~u : (u | 0x80000000u);
  }
  if (!largest) bits = ~bits;
  return (static_cast<unsigned long long>(bits) << 32) | (0xFFFFFFFFull - static_cast<unsigned long long>(l));
}

__device__ __forceinline__ long long key_position(unsigned long long key) {
  return static_cast<long long>(0xFFFFFFFFull - (key & 0xFFFFFFFFull));
}

// selected: `padded` (a power of two >= k) keys of dynamic shared memory.
__global__ void top_k_kernel(const float* __restrict__ x, float* __restrict__ values, long long* __restrict__ indices,
                             long long rows, long long len, long long inner, int k, int padded, bool largest) {
  extern __shared__ unsigned long long selected[];
  __shared__ unsigned int hist[256];
  __shared__ unsigned long long s_prefix;
  __shared__ long long s_remaining;
  __shared__ unsigned int s_count;
  pdl_wait();
  pdl_launch_dependents();
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const long long o = row / inner, in = row % inner;
    const float* src = x + o * len * inner + in;

    // Radix select: after the byte at `shift`, `prefix` holds the k-th largest key's bytes so far
    // and `remaining` its rank among the keys that share them.
    unsigned long long prefix = 0, mask = 0;
    long long remaining = k;
    for (int shift = 56; shift >= 0; shift -= 8) {
      for (int b = threadIdx.x; b < 256; b += blockDim.x) hist[b] = 0;
      __syncthreads();
      for (long long l = threadIdx.x; l < len; l += blockDim.x) {
        const unsigned long long key = top_k_key(src[l * inner], l, largest);
        if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 0xFFull], 1u);
      }
      __syncthreads();
      if (threadIdx.x == 0) {
        long long above = 0;  // keys in the bins above b
        int b = 255;
        for (; b > 0; --b) {
          if (above + hist[b] >= remaining) break;
          above += hist[b];
        }
        s_prefix = prefix | (static_cast<unsigned long long>(b) << shift);
        s_remaining = remaining - above;
      }
      __syncthreads();
      prefix = s_prefix;
      remaining = s_remaining;
      mask |= 0xFFull << shift;
    }

    // The keys are unique, so exactly k of them are >= the k-th largest.
    const unsigned long long threshold = prefix;
    if (threadIdx.x == 0) s_count = 0;
    for (int t = k + static_cast<int>(threadIdx.x); t < padded; t += blockDim.x) selected[t] = 0;
    __syncthreads();
    for (long long l = threadIdx.x; l < len; l += blockDim.x) {
      const unsigned long long key = top_k_key(src[l * inner], l, largest);
      if (key >= threshold) {
        const unsigned int slot = atomicAdd(&s_count, 1u);
        if (slot < static_cast<unsigned int>(k)) selected[slot] = key;
      }
    }
    __syncthreads();

    // Bitonic sort of selected[0, padded), largest key first (the padding keys, 0, go last).
    for (int size = 2; size <= padded; size <<= 1) {
      for (int stride = size >> 1; stride > 0; stride >>= 1) {
        for (int t = threadIdx.x; t < padded; t += blockDim.x) {
          const int partner = t ^ stride;
          if (partner > t) {
            const unsigned long long a = selected[t], b = selected[partner];
            const bool descending = (t & size) == 0;
            if (descending ? a < b : a > b) {
              selected[t] = b;
              selected[partner] = a;
            }
          }
        }
        __syncthreads();
      }
    }

    const long long out = o * k * inner + in;
    for (int j = threadIdx.x; j < k; j += blockDim.x) {
      const long long l = key_position(selected[j]);
      if (values != nullptr) values[out + j * inner] = src[l * inner];
      if (indices != nullptr) indices[out + j * inner] = l;
    }
    __syncthreads();
  }
}

}  // namespace

void launch_top_k(const float* x, float* values, long long* indices, long long outer, long long len, long long inner,
                  long long k, bool largest, cudaStream_t stream) {
  const long long rows = outer * inner;
  if (rows == 0 || k == 0) return;
  int padded = 1;
  while (padded < k) padded <<= 1;
  const long long blocks = rows < (1LL << 20) ? rows : (1LL << 20);
  launch_kernel(top_k_kernel, static_cast<unsigned>(blocks), kThreads,
                static_cast<std::size_t>(padded) * sizeof(unsigned long long), stream, x, values, indices, rows, len,
                inner, static_cast<int>(k), padded, largest);
  RW_CUDA_CHECK_LAUNCH("top_k");
}

}  // namespace redwood::cuda::kernels
