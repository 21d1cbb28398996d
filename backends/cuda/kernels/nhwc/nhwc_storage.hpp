#pragma once
// The storage types of NHWC activations (rw.ConvNhwc and the companion kernels; the contract is
// backends/cuda/passes/choose_gpu_layout.cpp's header comment). One definition for conv_nhwc.hpp and
// nhwc.hpp, which a translation unit may include together.

namespace redwood::cuda::kernels {

/// fp16 and bf16 (16-bit storage; the convolution multiplies with mma m16n8k16), and fp32
/// (fp32 storage at precision tf32; the convolution rounds its operands to tf32 for mma m16n8k8).
enum class NhwcStorage : int { kF16, kBF16, kF32 };

/// Channels in one 16-byte vector of the storage type: 8 of a 16-bit type, 4 of fp32. An NHWC
/// convolution's input channels are padded to a multiple of this (the copies move whole 16-byte
/// chunks that never straddle two window positions).
constexpr int nhwc_chunk_channels(NhwcStorage s) { return s == NhwcStorage::kF32 ? 4 : 8; }

}  // namespace redwood::cuda::kernels
