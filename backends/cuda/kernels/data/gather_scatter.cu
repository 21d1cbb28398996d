// Gather, GatherElements, GatherND and the scatters ScatterElements / ScatterND (reduction none):
// one thread per element of the output (gathers) or of the updates (scatters), grid-stride loops
// with 64-bit offsets. Elements move as 1-, 2-, 4- or 8-byte words, so any dtype of those sizes
// works; indices are int64 or int32. An index outside [-extent, extent) gives zero bytes
// (gathers) or no write (scatters).

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/device_math.cuh"
#include "backends/cuda/kernels/launchers.hpp"
#include "backends/cuda/kernels/pdl.cuh"

#include <cstdint>

namespace redwood::cuda::kernels {
namespace {

/// Index v normalized into [0, extent), or -1 when it is outside [-extent, extent).
__device__ __forceinline__ long long normalized_index(long long v, long long extent) {
  if (v < -extent || v >= extent) return -1;
  return v < 0 ? v + extent : v;
}

template <typename Idx>
__device__ __forceinline__ long long index_at(const Idx* __restrict__ indices, long long i) {
  return static_cast<long long>(indices[i]);
}

/// A gather's element i reads src[off] (zero bytes when off < 0); a scatter's update i writes
/// y[off] = src[i] (nothing when off < 0).
template <bool kScatter, typename T>
__device__ __forceinline__ void move_element(const T* __restrict__ src, T* __restrict__ y, long long i, long long off) {
  if (kScatter) {
    if (off >= 0) y[off] = src[i];
  } else {
    y[i] = off < 0 ? T(0) : src[off];
  }
}

// The kernels take untyped pointers (one launch helper serves them all): src is the data of a
// gather and the updates of a scatter, elements are read and written as T, indices as Idx.
template <typename T, typename Idx>
__global__ void gather_kernel(const void* src, const void* indices_v, void* y, long long n, long long extent,
                              long long count, long long inner) {
  pdl_wait();
  pdl_launch_dependents();
  const Idx* indices = static_cast<const Idx*>(indices_v);
  RW_GRID_STRIDE(i, n) {
    const long long in = i % inner;
    const long long j = (i / inner) % count;
    const long long o = i / (inner * count);
    const long long k = normalized_index(index_at(indices, j), extent);
    move_element<false>(static_cast<const T*>(src), static_cast<T*>(y), i, k < 0 ? -1 : (o * extent + k) * inner + in);
  }
}

/// The data offset element i of the indices addresses, or -1 for an index out of range.
template <typename Idx>
__device__ __forceinline__ long long element_offset(const Idx* __restrict__ indices, long long i,
                                                    const ElementIndexing& p) {
  const long long k = normalized_index(index_at(indices, i), p.extent);
  if (k < 0) return -1;
  long long rest = i, off = 0;
  for (int d = p.rank - 1; d >= 0; --d) {
    const long long pos = rest % p.dims[d];
    rest /= p.dims[d];
    off += (d == p.axis ? k : pos) * p.data_strides[d];
  }
  return off;
}

template <typename T, typename Idx, bool kScatter>
__global__ void elements_kernel(const void* src, const void* indices_v, void* y, long long n, ElementIndexing p) {
  pdl_wait();
  pdl_launch_dependents();
  const Idx* indices = static_cast<const Idx*>(indices_v);
  RW_GRID_STRIDE(i, n) {
    move_element<kScatter>(static_cast<const T*>(src), static_cast<T*>(y), i, element_offset(indices, i, p));
  }
}

/// The data offset where index tuple t's slice starts, or -1 when a coordinate is out of range.
template <typename Idx>
__device__ __forceinline__ long long tuple_offset(const Idx* __restrict__ indices, long long t, const NdIndexing& p) {
  long long off = (t / p.per_batch) * p.batch_elems;
  for (int k = 0; k < p.m; ++k) {
    const long long v = normalized_index(index_at(indices, t * p.m + k), p.extents[k]);
    if (v < 0) return -1;
    off += v * p.strides[k];
  }
  return off;
}

template <typename T, typename Idx, bool kScatter>
__global__ void nd_kernel(const void* src, const void* indices_v, void* y, long long n, NdIndexing p) {
  pdl_wait();
  pdl_launch_dependents();
  const Idx* indices = static_cast<const Idx*>(indices_v);
  RW_GRID_STRIDE(i, n) {
    const long long off = tuple_offset(indices, i / p.slice, p);
    move_element<kScatter>(static_cast<const T*>(src), static_cast<T*>(y), i, off < 0 ? -1 : off + i % p.slice);
  }
}

/// Launches pick(T{}, Idx{}) (a kernel instance) over n elements with args, T the unsigned word
/// of element_bytes and Idx the index type.
template <typename Pick, typename... Args>
void launch_indexed(const char* name, std::size_t element_bytes, bool indices_i64, long long n, cudaStream_t stream,
                    Pick pick, const Args&... args) {
  if (n == 0) return;
  auto go = [&](auto word) {
    if (indices_i64) {
      launch_kernel(pick(word, 0LL), grid_for(n), 256, 0, stream, args...);
    } else {
      launch_kernel(pick(word, 0), grid_for(n), 256, 0, stream, args...);
    }
  };
  switch (element_bytes) {
    case 1: go(std::uint8_t{}); break;
    case 2: go(std::uint16_t{}); break;
    case 4: go(std::uint32_t{}); break;
    default: go(std::uint64_t{}); break;
  }
  RW_CUDA_CHECK_LAUNCH(name);
}

}  // namespace

void launch_gather(const void* data, const void* indices, bool indices_i64, void* y, std::size_t element_bytes,
                   long long outer, long long extent, long long count, long long inner, cudaStream_t stream) {
  const long long n = outer * count * inner;
  launch_indexed("gather", element_bytes, indices_i64, n, stream,
                 [](auto word, auto index) { return gather_kernel<decltype(word), decltype(index)>; }, data, indices, y,
                 n, extent, count, inner);
}

void launch_gather_elements(const void* data, const void* indices, bool indices_i64, void* y,
                            std::size_t element_bytes, long long n, const ElementIndexing& p, cudaStream_t stream) {
  launch_indexed("gather_elements", element_bytes, indices_i64, n, stream,
                 [](auto word, auto index) { return elements_kernel<decltype(word), decltype(index), false>; }, data,
                 indices, y, n, p);
}

void launch_scatter_elements(const void* indices, bool indices_i64, const void* updates, void* y,
                             std::size_t element_bytes, long long n, const ElementIndexing& p, cudaStream_t stream) {
  launch_indexed("scatter_elements", element_bytes, indices_i64, n, stream,
                 [](auto word, auto index) { return elements_kernel<decltype(word), decltype(index), true>; },
                 updates, indices, y, n, p);
}

void launch_gather_nd(const void* data, const void* indices, bool indices_i64, void* y, std::size_t element_bytes,
                      long long n, const NdIndexing& p, cudaStream_t stream) {
  launch_indexed("gather_nd", element_bytes, indices_i64, n, stream,
                 [](auto word, auto index) { return nd_kernel<decltype(word), decltype(index), false>; }, data, indices,
                 y, n, p);
}

void launch_scatter_nd(const void* indices, bool indices_i64, const void* updates, void* y,
                       std::size_t element_bytes, long long n, const NdIndexing& p, cudaStream_t stream) {
  launch_indexed("scatter_nd", element_bytes, indices_i64, n, stream,
                 [](auto word, auto index) { return nd_kernel<decltype(word), decltype(index), true>; }, updates,
                 indices, y, n, p);
}

}  // namespace redwood::cuda::kernels
