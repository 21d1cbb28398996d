// Batched matrix product with Gemm's C term and the fused epilogue. Operands by strides, so
// transposes and broadcast batches cost nothing.
//
// - exact fp32 (gemm_simt): CUDA cores, 64×64 tiles, 256 threads, 4×4 outputs each.
// - tf32/fp16/bf16 (gemm_mma): tensor cores through mma.sync (m16n8k8 tf32, m16n8k16 f16/bf16),
//   fp32 accumulation. 64×64×16 block tiles, 4 warps of 32×32, a 3-stage cp.async pipeline: the
//   fp32 operands are staged in shared memory as they are in memory (16-byte copies where the
//   contiguous axis, the extents and the pointers allow, 4-byte copies otherwise) and rounded to
//   the operand type when a warp loads its fragments. Bounds are zero-filled by cp.async, so edge
//   tiles take the same path. Products with K ≤ 16 take the exact kernel at every precision.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/cp_async.cuh"
#include "backends/cuda/kernels/device_math.cuh"
#include "backends/cuda/kernels/matmul/matmul.hpp"
#include "backends/cuda/kernels/mma_ops.cuh"
#include "backends/cuda/kernels/pdl.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace redwood::cuda::kernels {
namespace {

// The offsets of batch z's A and B matrices.
__device__ __forceinline__ void batch_offsets(int z, const GemmParams& p, const GemmBatches& bb, long long& ao,
                                              long long& bo) {
  if (bb.rank == 0) {
    ao = z * p.a_batch;
    bo = z * p.b_batch;
    return;
  }
  long long rest = z;
  ao = bo = 0;
  for (int d = bb.rank - 1; d >= 0; --d) {
    const long long i = rest % bb.dims[d];
    rest /= bb.dims[d];
    ao += i * bb.a_strides[d];
    bo += i * bb.b_strides[d];
  }
}

// Y[z, m, n] = act(alpha · acc + beta · C + bias + residual), when (m, n) is inside Y.
__device__ __forceinline__ void store(const GemmParams& p, float* y, int z, int m, int n, float acc) {
  if (m >= p.m || n >= p.n) return;
  const long long idx = (static_cast<long long>(z) * p.m + m) * p.n + n;
  y[idx] = product_epilogue(acc, p.alpha, p.beta, p.c != nullptr ? p.c + (m * p.c_m + n * p.c_n) : nullptr, p.epilogue,
                            n, idx);
}

// ---- exact fp32 ----

constexpr int kBM = 64, kBN = 64, kBK = 16;

__global__ void __launch_bounds__(256) gemm_simt(const __grid_constant__ GemmParams p,
                                                 const __grid_constant__ GemmBatches bb, const float* __restrict__ a,
                                                 const float* __restrict__ b, float* __restrict__ y) {
  __shared__ float as[kBK][kBM + 1];
  __shared__ float bs[kBK][kBN + 1];
  const int batch = blockIdx.z;
  const int m0 = blockIdx.x * kBM, n0 = blockIdx.y * kBN;
  const int t = threadIdx.x, tx = t % 16, ty = t / 16;
  long long ao, bo;
  batch_offsets(batch, p, bb, ao, bo);
  const float* ab = a + ao;
  const float* bb_ = b + bo;
  float acc[4][4] = {};
  pdl_wait();  // either operand may be an activation (pdl.cuh)
  for (int k0 = 0; k0 < p.k; k0 += kBK) {
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const int idx = t + 256 * l;
      const int am = idx % kBM, ak = idx / kBM;
      as[ak][am] = (m0 + am < p.m && k0 + ak < p.k) ? ab[(m0 + am) * p.a_m + (k0 + ak) * p.a_k] : 0.f;
      const int bn = idx % kBN, bk = idx / kBN;
      bs[bk][bn] = (n0 + bn < p.n && k0 + bk < p.k) ? bb_[(k0 + bk) * p.b_k + (n0 + bn) * p.b_n] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBK; ++kk) {
      float av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) av[i] = as[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) bv[j] = bs[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
  pdl_launch_dependents();
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) store(p, y, batch, m0 + ty + 16 * i, n0 + tx + 16 * j, acc[i][j]);
}

// ---- tensor cores ----

constexpr int kTM = 64, kTN = 64, kTK = 16, kStages = 3, kThreads = 128;
constexpr int kKStride = kTK + 4;  // a row of 16 k values (+4: conflict-free fragment loads, 16-byte rows)


// The 16-bit operand type of a precision.
template <MmaType T> using Operand16 = std::conditional_t<T == MmaType::kFp16, half, __nv_bfloat16>;

// A is staged as [m][k]. B as [k][n] when its n axis is contiguous in memory (kBKN), else as
// [n][k]. kAVec/kBVec: 16-byte copies along the contiguous axis.
template <MmaType T, bool kAVec, bool kBKN, bool kBVec>
__global__ void __launch_bounds__(kThreads) gemm_mma(const __grid_constant__ GemmParams p,
                                                     const __grid_constant__ GemmBatches bb,
                                                     const float* __restrict__ a, const float* __restrict__ b,
                                                     float* __restrict__ y) {
  // [k][n] rows: +8 floats keeps tf32's B loads (k = t, n = g) conflict-free, +4 the 16-bit
  // types' (k = 2t, n = g).
  constexpr int kNStride = kTN + (T == MmaType::kTf32 ? 8 : 4);
  constexpr int kBStage = kBKN ? kTK * kNStride : kTN * kKStride;
  __shared__ __align__(16) float as_all[kStages][kTM * kKStride];
  __shared__ __align__(16) float bs_all[kStages][kBStage];

  const int z = blockIdx.z;
  long long ao, bo;
  batch_offsets(z, p, bb, ao, bo);
  const float* ab = a + ao;
  const float* bb_ = b + bo;
  const int m0 = blockIdx.x * kTM, n0 = blockIdx.y * kTN;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm = (warp / 2) * 32, wn = (warp % 2) * 32;
  const int g = lane >> 2, t = lane & 3;

  auto load_tile = [&](int stage, int kt) {
    const int k0 = kt * kTK;
    float* as = as_all[stage];
    float* bs = bs_all[stage];
    if constexpr (kAVec) {  // a_k == 1: 64 rows of four 16-byte chunks
#pragma unroll
      for (int l = 0; l < 2; ++l) {
        const int idx = tid + kThreads * l, row = idx / 4, kc = (idx % 4) * 4;
        const int m = m0 + row, k = k0 + kc;
        const bool ok = m < p.m && k < p.k;
        cp_async16(as + row * kKStride + kc, ok ? ab + static_cast<long long>(m) * p.a_m + k : ab, ok);
      }
    } else {  // element by element, consecutive threads along A's contiguous axis
#pragma unroll
      for (int l = 0; l < 8; ++l) {
        const int idx = tid + kThreads * l;
        const int row = p.a_m == 1 ? idx % kTM : idx / kTK, kk = p.a_m == 1 ? idx / kTM : idx % kTK;
        const int m = m0 + row, k = k0 + kk;
        const bool ok = m < p.m && k < p.k;
        cp_async4(as + row * kKStride + kk,
                  ok ? ab + static_cast<long long>(m) * p.a_m + static_cast<long long>(k) * p.a_k : ab, ok);
      }
    }
    if constexpr (kBKN && kBVec) {  // b_n == 1: 16 rows of k, sixteen 16-byte chunks each
#pragma unroll
      for (int l = 0; l < 2; ++l) {
        const int idx = tid + kThreads * l, kk = idx / 16, nc = (idx % 16) * 4;
        const int n = n0 + nc, k = k0 + kk;
        const bool ok = n < p.n && k < p.k;
        cp_async16(bs + kk * kNStride + nc, ok ? bb_ + static_cast<long long>(k) * p.b_k + n : bb_, ok);
      }
    } else if constexpr (kBKN) {
#pragma unroll
      for (int l = 0; l < 8; ++l) {
        const int idx = tid + kThreads * l, nn = idx % kTN, kk = idx / kTN;
        const int n = n0 + nn, k = k0 + kk;
        const bool ok = n < p.n && k < p.k;
        cp_async4(bs + kk * kNStride + nn, ok ? bb_ + static_cast<long long>(k) * p.b_k + n : bb_, ok);
      }
    } else if constexpr (kBVec) {  // b_k == 1: 64 rows of n, four 16-byte chunks each
#pragma unroll
      for (int l = 0; l < 2; ++l) {
        const int idx = tid + kThreads * l, nn = idx / 4, kc = (idx % 4) * 4;
        const int n = n0 + nn, k = k0 + kc;
        const bool ok = n < p.n && k < p.k;
        cp_async16(bs + nn * kKStride + kc, ok ? bb_ + static_cast<long long>(n) * p.b_n + k : bb_, ok);
      }
    } else {
#pragma unroll
      for (int l = 0; l < 8; ++l) {
        const int idx = tid + kThreads * l, kk = idx % kTK, nn = idx / kTK;
        const int n = n0 + nn, k = k0 + kk;
        const bool ok = n < p.n && k < p.k;
        cp_async4(bs + nn * kKStride + kk,
                  ok ? bb_ + static_cast<long long>(k) * p.b_k + static_cast<long long>(n) * p.b_n : bb_, ok);
      }
    }
  };

  // B(k, n) of the staged tile.
  auto bval = [](const float* bs, int k, int n) { return kBKN ? bs[k * kNStride + n] : bs[n * kKStride + k]; };

  float acc[2][4][4] = {};
  auto compute = [&](int stage) {
    const float* as = as_all[stage];
    const float* bs = bs_all[stage];
    if constexpr (T == MmaType::kTf32) {
#pragma unroll
      for (int ks = 0; ks < kTK; ks += 8) {
        std::uint32_t af[2][4], bf[4][2];
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const float* r0 = as + (wm + 16 * i + g) * kKStride + ks;
          const float* r1 = r0 + 8 * kKStride;
          af[i][0] = to_tf32(r0[t]);
          af[i][1] = to_tf32(r1[t]);
          af[i][2] = to_tf32(r0[t + 4]);
          af[i][3] = to_tf32(r1[t + 4]);
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int n = wn + 8 * j + g;
          bf[j][0] = to_tf32(bval(bs, ks + t, n));
          bf[j][1] = to_tf32(bval(bs, ks + t + 4, n));
        }
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) mma_m16n8k8_tf32(acc[i][j], af[i], bf[j][0], bf[j][1]);
      }
    } else {
      std::uint32_t af[2][4], bf[4][2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const float* r0 = as + (wm + 16 * i + g) * kKStride;
        const float* r1 = r0 + 8 * kKStride;
        af[i][0] = pack2<Operand16<T>>(r0[2 * t], r0[2 * t + 1]);
        af[i][1] = pack2<Operand16<T>>(r1[2 * t], r1[2 * t + 1]);
        af[i][2] = pack2<Operand16<T>>(r0[2 * t + 8], r0[2 * t + 9]);
        af[i][3] = pack2<Operand16<T>>(r1[2 * t + 8], r1[2 * t + 9]);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int n = wn + 8 * j + g;
        bf[j][0] = pack2<Operand16<T>>(bval(bs, 2 * t, n), bval(bs, 2 * t + 1, n));
        bf[j][1] = pack2<Operand16<T>>(bval(bs, 2 * t + 8, n), bval(bs, 2 * t + 9, n));
      }
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) mma_m16n8k16<Operand16<T>>(acc[i][j], af[i], bf[j][0], bf[j][1]);
    }
  };

  const int ktiles = (p.k + kTK - 1) / kTK;
  pdl_wait();  // either operand may be an activation (pdl.cuh)
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < ktiles) load_tile(s, s);
    cp_async_commit();
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<kStages - 2>();  // tile kt has landed (for this thread's copies) ...
    __syncthreads();               // ... for every thread's, and stage (kt - 1) is free again
    const int next = kt + kStages - 1;
    if (next < ktiles) load_tile(next % kStages, next);
    cp_async_commit();
    compute(kt % kStages);
  }
  pdl_launch_dependents();

#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int m = m0 + wm + 16 * i + g, n = n0 + wn + 8 * j + 2 * t;
      store(p, y, z, m, n, acc[i][j][0]);
      store(p, y, z, m, n + 1, acc[i][j][1]);
      store(p, y, z, m + 8, n, acc[i][j][2]);
      store(p, y, z, m + 8, n + 1, acc[i][j][3]);
    }
  }
}

bool aligned16(const float* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; }

// Every batch offset of an operand is a multiple of four floats (16-byte copies stay aligned).
bool batch_strides_by_4(const GemmParams& p, const GemmBatches& bb, bool a_side) {
  if (bb.rank == 0) return (a_side ? p.a_batch : p.b_batch) % 4 == 0;
  for (int d = 0; d < bb.rank; ++d) {
    if ((a_side ? bb.a_strides[d] : bb.b_strides[d]) % 4 != 0) return false;
  }
  return true;
}

template <MmaType T, bool kAVec, bool kBKN, bool kBVec>
void go(const GemmParams& p, const GemmBatches& bb, const float* a, const float* b, float* y, cudaStream_t stream) {
  const dim3 grid((p.m + kTM - 1) / kTM, (p.n + kTN - 1) / kTN, p.batch);
  launch_kernel(gemm_mma<T, kAVec, kBKN, kBVec>, grid, kThreads, 0, stream, p, bb, a, b, y);
}

template <MmaType T, bool kAVec>
void pick_b(const GemmParams& p, const GemmBatches& bb, const float* a, const float* b, float* y,
            cudaStream_t stream) {
  const bool b_ok = aligned16(b) && batch_strides_by_4(p, bb, false);
  if (p.b_n == 1 && p.n > 1) {
    if (b_ok && p.n % 4 == 0 && p.b_k % 4 == 0) {
      go<T, kAVec, true, true>(p, bb, a, b, y, stream);
    } else {
      go<T, kAVec, true, false>(p, bb, a, b, y, stream);
    }
  } else if (b_ok && p.b_k == 1 && p.k % 4 == 0 && p.b_n % 4 == 0) {
    go<T, kAVec, false, true>(p, bb, a, b, y, stream);
  } else {
    go<T, kAVec, false, false>(p, bb, a, b, y, stream);
  }
}

template <MmaType T>
void launch_mma(const GemmParams& p, const GemmBatches& bb, const float* a, const float* b, float* y,
                cudaStream_t stream) {
  const bool a_vec = p.a_k == 1 && p.k % 4 == 0 && p.a_m % 4 == 0 && aligned16(a) && batch_strides_by_4(p, bb, true);
  if (a_vec) {
    pick_b<T, true>(p, bb, a, b, y, stream);
  } else {
    pick_b<T, false>(p, bb, a, b, y, stream);
  }
}

}  // namespace

void launch_gemm(MmaType type, const GemmParams& p, const GemmBatches& batches, const float* a, const float* b,
                 float* y, cudaStream_t stream) {
  if (p.batch == 0 || p.m == 0 || p.n == 0) return;
  // With one k-tile or less the tensor cores gain nothing over the CUDA cores and the staging
  // costs more (measured on the H200: batch 16 of 40×40×15, 6.8 µs exact against 9.8 µs on the
  // tensor cores), so such products compute exactly at every precision.
  if (p.k <= kTK) type = MmaType::kFp32;
  switch (type) {
    case MmaType::kFp32: {
      const dim3 grid((p.m + kBM - 1) / kBM, (p.n + kBN - 1) / kBN, p.batch);
      launch_kernel(gemm_simt, grid, 256, 0, stream, p, batches, a, b, y);
      RW_CUDA_CHECK_LAUNCH("gemm_simt");
      return;
    }
    case MmaType::kTf32: launch_mma<MmaType::kTf32>(p, batches, a, b, y, stream); break;
    case MmaType::kFp16: launch_mma<MmaType::kFp16>(p, batches, a, b, y, stream); break;
    case MmaType::kBf16: launch_mma<MmaType::kBf16>(p, batches, a, b, y, stream); break;
  }
  RW_CUDA_CHECK_LAUNCH("gemm_mma");
}

void launch_gemm(const GemmParams& p, const float* a, const float* b, float* y, cudaStream_t stream) {
  launch_gemm(MmaType::kFp32, p, GemmBatches{}, a, b, y, stream);
}

}  // namespace redwood::cuda::kernels
