#pragma once
// 8 channels of an NHWC activation as one vector access, widened to fp32 in registers: 16 bytes
// of fp16 or bf16 (one 128-bit load or store), or 32 bytes of fp32 (two). Callers keep 16-byte
// alignment: C % 8 == 0 and 16-byte aligned tensors (the runner's workspace offsets are 256-byte
// aligned). load_vec/store_vec<V> also take V = 4 for fp32 (one 16-byte access: the conversions
// of fp32 tensors with C % 4 == 0).

#include "backends/cuda/kernels/mma_ops.cuh"
#include "backends/cuda/kernels/nhwc/nhwc.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace redwood::cuda::kernels {

/// The raw bytes of 8 channels: one 16-byte vector of a 16-bit type, two of fp32. Loading raw
/// and widening later lets a kernel issue a row's loads back to back (no branch between them).
template <typename T>
struct Raw8 {
  uint4 u[sizeof(T) / 2];
};

template <typename T>
__device__ __forceinline__ Raw8<T> load_raw8(const T* p) {
  Raw8<T> r;
#pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof(T) / 2); ++i) r.u[i] = __ldg(reinterpret_cast<const uint4*>(p) + i);
  return r;
}

/// r, or zeros where !keep (a select, not a branch).
template <typename T>
__device__ __forceinline__ Raw8<T> keep_or_zero(const Raw8<T>& r, bool keep) {
  Raw8<T> z;
#pragma unroll
  for (int i = 0; i < static_cast<int>(sizeof(T) / 2); ++i) {
    z.u[i] = keep ? r.u[i] : make_uint4(0u, 0u, 0u, 0u);
  }
  return z;
}

__device__ __forceinline__ void widen8(const Raw8<__half>& r, float (&f)[8]) {
  const __half2* h = reinterpret_cast<const __half2*>(&r.u[0]);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 t = __half22float2(h[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}

__device__ __forceinline__ void widen8(const Raw8<__nv_bfloat16>& r, float (&f)[8]) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&r.u[0]);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 t = __bfloat1622float2(h[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}

__device__ __forceinline__ void widen8(const Raw8<float>& r, float (&f)[8]) {
  const float* v = reinterpret_cast<const float*>(&r.u[0]);
#pragma unroll
  for (int i = 0; i < 8; ++i) f[i] = v[i];
}

/// 8 channels at p (16-byte aligned), widened to fp32.
template <typename T>
__device__ __forceinline__ void load8(const T* p, float (&f)[8]) {
  widen8(load_raw8(p), f);
}

/// Rounds to the storage type once (round to nearest even).
__device__ __forceinline__ void store8(__half* p, const float (&f)[8]) {
  uint4 u;
  __half2* h = reinterpret_cast<__half2*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2half2_rn(f[2 * i], f[2 * i + 1]);
  *reinterpret_cast<uint4*>(p) = u;
}

__device__ __forceinline__ void store8(__nv_bfloat16* p, const float (&f)[8]) {
  uint4 u;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  *reinterpret_cast<uint4*>(p) = u;
}

__device__ __forceinline__ void store8(float* p, const float (&f)[8]) {
  reinterpret_cast<float4*>(p)[0] = make_float4(f[0], f[1], f[2], f[3]);
  reinterpret_cast<float4*>(p)[1] = make_float4(f[4], f[5], f[6], f[7]);
}

/// fp32 storage at precision tf32 (the pass's rw.round_tf32): when `on`, each value rounded to
/// tf32 (to nearest, ties away: cvt.rna.tf32.f32) and kept as fp32, so that a tensor core's tf32
/// operand (wgmma's truncation, mma.sync's cvt.rna) takes it unchanged.
template <int V>
__device__ __forceinline__ void round_tf32_if(bool on, float (&f)[V]) {
  if (!on) return;
#pragma unroll
  for (int i = 0; i < V; ++i) f[i] = __uint_as_float(to_tf32(f[i]));
}

/// 8 fp32 values (weights, bias, scale) as two 16-byte loads; p 16-byte aligned.
__device__ __forceinline__ void load8_f32(const float* p, float (&f)[8]) { load8<float>(p, f); }

/// V channels at p: V = 8 as load8/store8; V = 4 only for fp32 (one 16-byte access).
template <int V, typename T>
__device__ __forceinline__ void load_vec(const T* p, float (&f)[V]) {
  if constexpr (V == 8) {
    load8(p, f);
  } else {
    static_assert(V == 4 && std::is_same_v<T, float>, "4-channel vectors are 16 bytes of fp32");
    const float4 v = __ldg(reinterpret_cast<const float4*>(p));
    f[0] = v.x, f[1] = v.y, f[2] = v.z, f[3] = v.w;
  }
}
template <int V, typename T>
__device__ __forceinline__ void store_vec(T* p, const float (&f)[V]) {
  if constexpr (V == 8) {
    store8(p, f);
  } else {
    static_assert(V == 4 && std::is_same_v<T, float>, "4-channel vectors are 16 bytes of fp32");
    *reinterpret_cast<float4*>(p) = make_float4(f[0], f[1], f[2], f[3]);
  }
}

/// Calls f(T{}) with T the storage type's device type.
template <typename F>
void with_storage(NhwcStorage s, F&& f) {
  if (s == NhwcStorage::kF16) {
    f(__half{});
  } else if (s == NhwcStorage::kBF16) {
    f(__nv_bfloat16{});
  } else {
    f(float{});
  }
}

}  // namespace redwood::cuda::kernels
