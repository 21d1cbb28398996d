#pragma once
// The NHWC companion kernels (nhwc.cu, conv_depthwise_nhwc.cu): what runs between the NHWC
// convolutions of a region backends/cuda/passes/choose_gpu_layout.cpp makes at fp16/bf16/tf32 (the ops'
// contract is that pass's header comment; docs/cuda.md, Kernels). Activations are [N, H, W, C] in
// the storage type S (fp16, bf16 or fp32) with C a multiple of 8 and 16-byte aligned rows, so
// every kernel moves 8 channels per thread (one 16-byte access of a 16-bit type, two of fp32) and
// computes in fp32. The conversions also take fp32 tensors of C % 4 == 0 (4 channels, 16 bytes,
// a thread): the stem's 3 channels padded to 4 at fp32. Launchers return nothing and check the launch (RW_CUDA_CHECK_LAUNCH); all
// kernels are launched with kernels::launch_kernel (programmatic dependent launch, pdl.cuh).

#include "backends/cuda/kernels/kernel_params.hpp"
#include "backends/cuda/kernels/nhwc/nhwc_storage.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace redwood::cuda::kernels {


/// Channels per thread of the kernels: 16 bytes of a 16-bit type (32 of fp32).
inline constexpr int kNhwcVec = 8;

/// fp32 [N, C, H, W] → S [N, H, W, cp]; channels c..cp-1 are written as 0. cp ≥ c, and cp % 8 == 0
/// (S fp32: cp % 4 == 0).
/// `round_tf32` (fp32 storage at precision tf32, the node's rw.round_tf32; also the max pool's,
/// the scale's and the depthwise convolution's): the stored values are rounded to tf32
/// (cvt.rna.tf32.f32) and kept as fp32; ignored for 16-bit storage.
void launch_to_nhwc(NhwcStorage s, const float* x, void* y, int n, int c, int h, int w, int cp, cudaStream_t stream,
                    bool round_tf32 = false);

/// S [N, H, W, cp] → fp32 [N, c, H, W] (channels ≥ c dropped). c ≤ cp, cp as launch_to_nhwc's.
void launch_to_nchw(NhwcStorage s, const void* x, float* y, int n, int c, int h, int w, int cp, cudaStream_t stream);

/// 2-D max pooling on S [N, H, W, C] → S [N, OH, OW, C] (extents as ONNX MaxPool, planned by
/// the caller). Only positions inside the input are compared: padding never wins.
struct NhwcPoolParams {
  int n, h, w, c, oh, ow;
  int kh, kw, sh, sw, ph, pw, dh, dw;  // ph/pw: top/left padding
  bool round_tf32 = false;            // fp32 storage: outputs rounded to tf32 (launch_to_nhwc)
};
void launch_max_pool_nhwc(NhwcStorage s, const NhwcPoolParams& p, const void* x, void* y, cudaStream_t stream);

/// How the global mean splits its work: a block takes `vecs` channel vectors of one image (8·vecs
/// channels) with its 256 threads on `slices` slices of the pixels; each image is cut into `parts`
/// runs of pixels whose sums a second kernel adds in a fixed order (parts > 1 needs the workspace).
/// The default {32, 8, 1} is a block per 256 channels of an image.
struct NhwcGapPlan {
  int vecs = 32, slices = 8, parts = 1;
};
/// The plan for [n, hw, c] on `multiprocessors` (without CudaOptions::gap_split the kernel keeps the
/// default plan).
NhwcGapPlan global_avg_pool_nhwc_plan(int n, long long hw, int c, int multiprocessors);
/// Scratch bytes the plan needs: the parts' sums, n · parts · c floats (0 for one part).
std::size_t global_avg_pool_nhwc_workspace(const NhwcGapPlan& plan, int n, int c);
/// Mean over H·W of S [N, H, W, C] → fp32 [N, C] (fp32 sums, in an order fixed by the plan:
/// deterministic). `workspace`: global_avg_pool_nhwc_workspace(plan) bytes; null runs one part.
void launch_global_avg_pool_nhwc(NhwcStorage s, const void* x, float* y, int n, long long hw, int c,
                                 cudaStream_t stream, const NhwcGapPlan& plan = {}, float* workspace = nullptr);

/// y[n, p, c] = x[n, p, c] · scale[n·C + c] over S [N, HW, C], scale fp32.
void launch_scale_channels_nhwc(NhwcStorage s, const void* x, const float* scale, void* y, int n, long long hw, int c,
                                cudaStream_t stream, bool round_tf32 = false);

/// Depthwise convolution (group == C == K, multiplier 1) on S [N, H, W, C] with fp32 weights
/// [R, S, C], fp32 bias [C] (may be null), S residual [N, OH, OW, C] (may be null) and the fused
/// activation (e.act/alpha/beta; e.bias and e.residual are ignored: the typed pointers below).
struct NhwcDepthwiseParams {
  int n, h, w, c, oh, ow;
  int r, s, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;  // pad_h/pad_w: top/left
  bool round_tf32 = false;  // fp32 storage: outputs rounded to tf32 (launch_to_nhwc)
};
/// Which kernel a shape takes: "tiled RxS/stride" (3×3, 5×5, 7×7 windows, equal strides 1 or 2,
/// dilation 1: a register window along W) or "direct" (anything else).
const char* depthwise_nhwc_variant(const NhwcDepthwiseParams& p);
/// The tiled kernel's work per thread: `vec` channels (8; 4 at fp32 storage, one 16-byte load),
/// `ox` outputs along W, `oy` output rows. All variants add the same products in the same order
/// (the same bits); they differ in loads in flight, registers and how often an input is loaded.
struct NhwcDepthwiseVariant {
  int vec = 8, ox = 4, oy = 1;
};
/// The variants the tuner may time for this shape, the default {8, 4, 1} first (the only one for
/// the direct kernel and 7×7 windows).
std::vector<NhwcDepthwiseVariant> depthwise_nhwc_candidates(NhwcStorage s, const NhwcDepthwiseParams& p);
/// depthwise_nhwc_variant and, for the tiled kernel, the variant: "tiled 3x3/1 4ch 4x2".
std::string depthwise_nhwc_variant_name(const NhwcDepthwiseParams& p, const NhwcDepthwiseVariant& v);
/// `v`: one of depthwise_nhwc_candidates(s, p) (anything else runs the default).
void launch_depthwise_nhwc(NhwcStorage s, const NhwcDepthwiseParams& p, const void* x, const float* w,
                           const float* bias, const void* residual, void* y, const Epilogue& e, cudaStream_t stream,
                           const NhwcDepthwiseVariant& v = {});

}  // namespace redwood::cuda::kernels
