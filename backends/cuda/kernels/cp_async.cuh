#pragma once
// Asynchronous global-to-shared copies (sm_80+ cp.async), shared by the tensor-core kernels
// (conv_mma.cuh, conv_nhwc_mma.cuh, matmul.cu): each copies 4 or 16 bytes when `valid`, else
// writes zeros (src-size 0 reads nothing, but src must still be a valid address), and a group
// of copies is committed and waited for by count.

namespace redwood::cuda::kernels {

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
// 4 bytes, through L1 (.ca: gathers that neighbours may read again).
__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(valid ? 4 : 0));
}
// 16 bytes, around L1 (.cg).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N committed groups of this thread are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

}  // namespace redwood::cuda::kernels
