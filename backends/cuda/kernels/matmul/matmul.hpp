#pragma once
// The matrix-product launcher at a precision (matmul.cu): exact fp32 on CUDA cores (the 64×64
// SIMT tiles of launch_gemm in launchers.hpp), or tf32/fp16/bf16 operands on the tensor cores
// (mma.sync, fp32 accumulation), with numpy broadcasting of the batch dimensions. No Redwood
// headers beyond launchers.hpp, so nvcc stays quick.

#include "backends/cuda/kernels/launchers.hpp"

namespace redwood::cuda::kernels {

/// How the batch index of Y (contiguous over `dims`) maps to A's and B's offsets: numpy
/// broadcasting is a stride of 0 along an axis of extent 1. rank 0: GemmParams' a_batch/b_batch.
struct GemmBatches {
  int rank = 0;
  long long dims[kMaxDims] = {};
  long long a_strides[kMaxDims] = {};
  long long b_strides[kMaxDims] = {};
};

/// Y[b] = act(alpha · op(A[b]) · op(B[b]) + beta · C + bias + residual) with the operands rounded
/// to `type` (kFp32: exact; K ≤ 16 is computed exactly at every type, which is faster there).
/// p.batch is the product of batches.dims when batches.rank > 0.
void launch_gemm(MmaType type, const GemmParams& p, const GemmBatches& batches, const float* a, const float* b,
                 float* y, cudaStream_t stream);

}  // namespace redwood::cuda::kernels
