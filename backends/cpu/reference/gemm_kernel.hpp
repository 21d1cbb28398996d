#pragma once
// A cache-blocked fp32 matrix product for the reference kernels: Conv (im2col + GEMM per group),
// ConvTranspose (GEMM + col2im), MatMul and Gemm all call sgemm().
//
// Matrices are row-major. op(A) is the m x k left operand: A itself (trans_a false, row stride
// lda >= k) or the transpose of a k x m matrix (trans_a true, row stride lda >= m); likewise op(B)
// is k x n. The product is computed as
//
//     C = alpha * op(A) * op(B) + beta * C        (C is m x n, row stride ldc >= n)
//
// When beta is 0, C is not read (it may hold garbage or NaN, as a fresh Tensor::empty does).
// The work is split over oneTBB's workers; callers may call sgemm from inside a parallel_for.

#include <cstdint>

namespace redwood::cpu {

void sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
           const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
           std::int64_t ldc);

}  // namespace redwood::cpu
