// Comparisons, logical ops, IsNaN/IsInf/Not and Where: the kernels whose outputs (or condition)
// are bools, one byte each. Memory-bound grid-stride loops; broadcasting walks the output's dims
// with per-operand strides (0 along broadcast axes), as elementwise.cu's general binary kernel.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/device_math.cuh"
#include "backends/cuda/kernels/launchers.hpp"
#include "backends/cuda/kernels/pdl.cuh"

#include <cstdint>

namespace redwood::cuda::kernels {
namespace {

template <typename T>
__device__ __forceinline__ bool compare(CompareOp op, T a, T b) {
  switch (op) {
    case CompareOp::kEqual: return a == b;
    case CompareOp::kLess: return a < b;
    case CompareOp::kGreater: return a > b;
    case CompareOp::kLessOrEqual: return a <= b;
    case CompareOp::kGreaterOrEqual: return a >= b;
    case CompareOp::kAnd: return (a != T(0)) && (b != T(0));
    case CompareOp::kOr: return (a != T(0)) || (b != T(0));
    case CompareOp::kXor: return (a != T(0)) != (b != T(0));
  }
  return false;
}

template <typename T>
__global__ void compare_kernel(CompareOp op, const T* __restrict__ a, const T* __restrict__ b,
                               std::uint8_t* __restrict__ y, long long n, Broadcast bc) {
  pdl_wait();
  pdl_launch_dependents();
  RW_GRID_STRIDE(i, n) {
    long long ao = i, bo = i;
    if (!bc.same_shape) {
      long long rest = i;
      ao = 0;
      bo = 0;
      for (int d = bc.rank - 1; d >= 0; --d) {
        const long long idx = rest % bc.out_dims[d];
        rest /= bc.out_dims[d];
        ao += idx * bc.a_strides[d];
        bo += idx * bc.b_strides[d];
      }
    }
    y[i] = compare(op, a[ao], b[bo]) ? 1 : 0;
  }
}

__global__ void predicate_kernel(PredicateOp op, const void* __restrict__ x, std::uint8_t* __restrict__ y, long long n,
                                 bool detect_negative, bool detect_positive) {
  pdl_wait();
  pdl_launch_dependents();
  RW_GRID_STRIDE(i, n) {
    bool r = false;
    if (op == PredicateOp::kNot) {
      r = static_cast<const std::uint8_t*>(x)[i] == 0;
    } else {
      const float v = static_cast<const float*>(x)[i];
      if (op == PredicateOp::kIsNaN) {
        r = isnan(v);
      } else {
        r = isinf(v) && ((v > 0.f && detect_positive) || (v < 0.f && detect_negative));
      }
    }
    y[i] = r ? 1 : 0;
  }
}

template <typename T>
__global__ void where_kernel(const std::uint8_t* __restrict__ cond, const T* __restrict__ x, const T* __restrict__ z,
                             T* __restrict__ y, long long n, Broadcast3 bc) {
  pdl_wait();
  pdl_launch_dependents();
  RW_GRID_STRIDE(i, n) {
    long long rest = i, co = 0, xo = 0, zo = 0;
    for (int d = bc.rank - 1; d >= 0; --d) {
      const long long idx = rest % bc.out_dims[d];
      rest /= bc.out_dims[d];
      co += idx * bc.strides[0][d];
      xo += idx * bc.strides[1][d];
      zo += idx * bc.strides[2][d];
    }
    y[i] = cond[co] != 0 ? x[xo] : z[zo];
  }
}

}  // namespace

void launch_compare(CompareOp op, CompareType type, const void* a, const void* b, std::uint8_t* y, long long n,
                    const Broadcast& bc, cudaStream_t stream) {
  if (n == 0) return;
  switch (type) {
    case CompareType::kF32:
      launch_kernel(compare_kernel<float>, grid_for(n), 256, 0, stream, op, static_cast<const float*>(a),
                    static_cast<const float*>(b), y, n, bc);
      break;
    case CompareType::kI64:
      launch_kernel(compare_kernel<long long>, grid_for(n), 256, 0, stream, op, static_cast<const long long*>(a),
                    static_cast<const long long*>(b), y, n, bc);
      break;
    case CompareType::kI32:
      launch_kernel(compare_kernel<int>, grid_for(n), 256, 0, stream, op, static_cast<const int*>(a),
                    static_cast<const int*>(b), y, n, bc);
      break;
    case CompareType::kBool:
      launch_kernel(compare_kernel<std::uint8_t>, grid_for(n), 256, 0, stream, op,
                    static_cast<const std::uint8_t*>(a), static_cast<const std::uint8_t*>(b), y, n, bc);
      break;
  }
  RW_CUDA_CHECK_LAUNCH("compare");
}

void launch_predicate(PredicateOp op, const void* x, std::uint8_t* y, long long n, bool detect_negative,
                      bool detect_positive, cudaStream_t stream) {
  if (n == 0) return;
  launch_kernel(predicate_kernel, grid_for(n), 256, 0, stream, op, x, y, n, detect_negative, detect_positive);
  RW_CUDA_CHECK_LAUNCH("predicate");
}

void launch_where(const std::uint8_t* cond, const void* x, const void* z, void* y, std::size_t element_bytes,
                  long long n, const Broadcast3& bc, cudaStream_t stream) {
  if (n == 0) return;
  auto go = [&](auto tag) {
    using T = decltype(tag);
    launch_kernel(where_kernel<T>, grid_for(n), 256, 0, stream, cond, static_cast<const T*>(x),
                  static_cast<const T*>(z), static_cast<T*>(y), n, bc);
  };
  switch (element_bytes) {
    case 1: go(std::uint8_t{}); break;
    case 2: go(std::uint16_t{}); break;
    case 4: go(std::uint32_t{}); break;
    default: go(std::uint64_t{}); break;
  }
  RW_CUDA_CHECK_LAUNCH("where");
}

}  // namespace redwood::cuda::kernels
