#pragma once
// The tensor-core instructions (mma.sync, fp32 accumulation) and operand conversions shared by
// the convolutions (conv_mma.cuh, conv_nhwc_mma.cuh) and the matrix product (matmul.cu). S is
// the 16-bit operand type: half or __nv_bfloat16.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace redwood::cuda::kernels {

/// fp32 rounded to tf32 (to nearest, ties away), as the m16n8k8 tf32 operand register.
__device__ __forceinline__ std::uint32_t to_tf32(float x) {
  std::uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}

/// Two values rounded to S as one operand register, `lo` (the lower k index) in the low half.
template <typename S>
__device__ __forceinline__ std::uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<S, half>) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&h);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&h);
  }
}

/// The two S values of a register, widened to fp32 (low half in x).
template <typename S>
__device__ __forceinline__ float2 unpack2(std::uint32_t v) {
  if constexpr (std::is_same_v<S, half>) {
    return __half22float2(*reinterpret_cast<const __half2*>(&v));
  } else {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v));
  }
}

/// d += a · b for one m16n8k16 tile of S operands: a is 4 registers, b0 and b1 the B fragment.
template <typename S>
__device__ __forceinline__ void mma_m16n8k16(float* d, const std::uint32_t* a, std::uint32_t b0, std::uint32_t b1) {
  if constexpr (std::is_same_v<S, half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

/// d += a · b for one m16n8k8 tile of tf32 operands (to_tf32).
__device__ __forceinline__ void mma_m16n8k8_tf32(float* d, const std::uint32_t* a, std::uint32_t b0,
                                                 std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace redwood::cuda::kernels
