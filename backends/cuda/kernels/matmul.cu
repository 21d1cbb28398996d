// Batched matrix product with Gemm's C term and the fused epilogue, exact fp32 on CUDA cores:
// 64×64 tiles, 256 threads, 4×4 outputs each, operands by strides so transposes and broadcast
// batches cost nothing.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/device_math.cuh"
#include "backends/cuda/kernels/launchers.hpp"

namespace redwood::cuda::kernels {
namespace {

constexpr int kBM = 64, kBN = 64, kBK = 16;

__global__ void __launch_bounds__(256) gemm_simt(GemmParams p, const float* __restrict__ a,
                                                 const float* __restrict__ b, float* __restrict__ y) {
  __shared__ float as[kBK][kBM + 1];
  __shared__ float bs[kBK][kBN + 1];
  const int batch = blockIdx.z;
  const int m0 = blockIdx.x * kBM, n0 = blockIdx.y * kBN;
  const int t = threadIdx.x, tx = t % 16, ty = t / 16;
  const float* ab = a + batch * p.a_batch;
  const float* bb = b + batch * p.b_batch;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < p.k; k0 += kBK) {
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const int idx = t + 256 * l;
      const int am = idx % kBM, ak = idx / kBM;
      as[ak][am] = (m0 + am < p.m && k0 + ak < p.k) ? ab[(m0 + am) * p.a_m + (k0 + ak) * p.a_k] : 0.f;
      const int bn = idx % kBN, bk = idx / kBN;
      bs[bk][bn] = (n0 + bn < p.n && k0 + bk < p.k) ? bb[(k0 + bk) * p.b_k + (n0 + bn) * p.b_n] : 0.f;
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
  const Epilogue& e = p.epilogue;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int m = m0 + ty + 16 * i;
    if (m >= p.m) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int n = n0 + tx + 16 * j;
      if (n >= p.n) continue;
      const long long idx = (static_cast<long long>(batch) * p.m + m) * p.n + n;
      float v = p.alpha * acc[i][j];
      if (p.c != nullptr) v += p.beta * p.c[m * p.c_m + n * p.c_n];
      if (e.bias != nullptr) v += e.bias[n];
      if (e.residual != nullptr) v += e.residual[idx];
      y[idx] = activate(v, e.act, e.alpha, e.beta);
    }
  }
}

}  // namespace

void launch_gemm(const GemmParams& p, const float* a, const float* b, float* y, cudaStream_t stream) {
  if (p.batch == 0 || p.m == 0 || p.n == 0) return;
  const dim3 grid((p.m + kBM - 1) / kBM, (p.n + kBN - 1) / kBN, p.batch);
  gemm_simt<<<grid, 256, 0, stream>>>(p, a, b, y);
  RW_CUDA_CHECK_LAUNCH("gemm_simt");
}

}  // namespace redwood::cuda::kernels
