#pragma once
// Launchers of the non-convolution kernels, one .cu per family: elementwise.cu, compare_select.cu,
// pool_resize.cu, softmax_reduce.cu, normalize.cu, matmul.cu, data_movement.cu, pad.cu, cast.cu,
// picture_normalize.cu. fp32 tensors unless said otherwise.

#include "backends/cuda/kernels/kernel_params.hpp"

#include <cstddef>
#include <cstdint>

namespace redwood::cuda::kernels {

// ---- elementwise.cu ----
enum class UnaryOp : int {
  kRelu, kSigmoid, kTanh, kHardSigmoid, kHardSwish, kLeakyRelu, kClip, kSqrt, kExp, kLog, kNeg, kAbs,
  kReciprocal, kFloor, kCeil, kErf, kSign, kRound, kSin, kCos, kTan, kAsin, kAcos, kAtan, kSinh, kCosh,
  kAsinh, kAcosh, kAtanh, kSoftplus, kSoftsign, kElu, kSelu, kCelu, kThresholdedRelu, kShrink, kMish,
  kGelu, kGeluTanh
};
/// y[i] = op(x[i]); alpha/beta: LeakyRelu/Elu/Celu/ThresholdedRelu alpha, HardSigmoid alpha/beta,
/// Clip min/max, Selu alpha/gamma, Shrink bias/lambd.
void launch_unary(UnaryOp op, const float* x, float* y, long long n, float alpha, float beta, cudaStream_t stream);

/// kMean: (a + b) / 2 (Mean of two inputs); kPRelu: a < 0 ? a · b : a; kFmod: C's fmod (Mod, fmod = 1).
enum class BinaryOp : int { kAdd, kSub, kMul, kDiv, kPow, kMax, kMin, kMean, kPRelu, kFmod };
/// Broadcast over the output's dims: a_strides/b_strides are 0 along broadcast axes.
struct Broadcast {
  int rank = 0;
  long long out_dims[kMaxDims] = {};
  long long a_strides[kMaxDims] = {};
  long long b_strides[kMaxDims] = {};
  bool same_shape = false;  // both operands have the output's shape: plain indexing
};
void launch_binary(BinaryOp op, const float* a, const float* b, float* y, long long n, const Broadcast& bc,
                   cudaStream_t stream);

/// Inference BatchNormalization over [N, C, inner]: y = (x − mean) · scale / sqrt(var + eps) + bias.
void launch_batch_norm(const float* x, const float* scale, const float* bias, const float* mean, const float* var,
                       float* y, long long n, int c, long long inner, float epsilon, cudaStream_t stream);

// ---- compare_select.cu ----
/// Comparisons of f32, i64, i32 or bool (u8) operands, and logical ops on bools; the output is
/// bool (one byte, 0 or 1). Broadcast as launch_binary.
enum class CompareOp : int { kEqual, kLess, kGreater, kLessOrEqual, kGreaterOrEqual, kAnd, kOr, kXor };
enum class CompareType : int { kF32, kI64, kI32, kBool };
void launch_compare(CompareOp op, CompareType type, const void* a, const void* b, std::uint8_t* y, long long n,
                    const Broadcast& bc, cudaStream_t stream);
/// Bool results of one input: Not (bool input), IsNaN, IsInf (f32 input; detect_negative /
/// detect_positive choose which infinities count).
enum class PredicateOp : int { kNot, kIsNaN, kIsInf };
void launch_predicate(PredicateOp op, const void* x, std::uint8_t* y, long long n, bool detect_negative,
                      bool detect_positive, cudaStream_t stream);
/// Where: y[i] = cond[i] ? x[i] : z[i] with three-way broadcasting (strides 0 along broadcast
/// axes), for elements of 1, 2, 4 or 8 bytes.
struct Broadcast3 {
  int rank = 0;
  long long out_dims[kMaxDims] = {};
  long long strides[3][kMaxDims] = {};  // condition, x, z
};
void launch_where(const std::uint8_t* cond, const void* x, const void* z, void* y, std::size_t element_bytes,
                  long long n, const Broadcast3& bc, cudaStream_t stream);

// ---- pool_resize.cu ----
struct PoolParams {
  int n, c, h, w, oh, ow;
  int kh, kw, sh, sw, ph, pw, dh, dw;
  int pad_end_h, pad_end_w;
  bool max = true;
  bool count_include_pad = false;
};
void launch_pool2d(const PoolParams& p, const float* x, float* y, cudaStream_t stream);
/// Mean (or max) over `inner` contiguous values for each of `rows`.
void launch_global_pool(const float* x, float* y, long long rows, long long inner, bool max, cudaStream_t stream);

enum class ResizeMode : int { kNearest, kLinear };
enum class ResizeCoord : int { kHalfPixel, kPytorchHalfPixel, kAlignCorners, kAsymmetric, kTfHalfPixelForNn };
enum class ResizeNearest : int { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };
struct ResizeParams {
  long long planes;  // N·C
  int h, w, oh, ow;
  float scale_h, scale_w;
  ResizeMode mode;
  ResizeCoord coord;
  ResizeNearest nearest;
};
void launch_resize(const ResizeParams& p, const float* x, float* y, cudaStream_t stream);

// ---- softmax_reduce.cu ----
/// Softmax (or log-softmax) along the middle axis of [outer, axis, inner].
void launch_softmax(const float* x, float* y, long long outer, long long axis, long long inner, bool log,
                    cudaStream_t stream);

enum class ReduceOp : int { kMean, kSum, kMax, kMin, kSumSquare, kL2, kProd, kL1, kLogSum, kLogSumExp };
/// For each output element (the input with reduced axes of extent 1), reduces over the reduced
/// axes. kept_*: the output's dims with the input's strides; red_*: the reduced axes.
struct ReduceParams {
  int kept_rank = 0, red_rank = 0;
  long long kept_dims[kMaxDims] = {}, kept_strides[kMaxDims] = {};
  long long red_dims[kMaxDims] = {}, red_strides[kMaxDims] = {};
  long long red_count = 1;
};
void launch_reduce(ReduceOp op, const ReduceParams& p, const float* x, float* y, long long outputs,
                   cudaStream_t stream);
/// ArgMax (max) or ArgMin along the middle axis of [outer, len, inner] into int64 indices.
void launch_arg_reduce(const float* x, long long* y, long long outer, long long len, long long inner, bool max,
                       bool select_last, cudaStream_t stream);

// ---- normalize.cu ----
/// Normalizes each of `rows` contiguous rows of `len` values: y = (x − mean) / sqrt(var + eps) ·
/// scale + bias. The scale and bias index is the position in the row (LayerNormalization,
/// scale_period = len) or the row's channel (InstanceNormalization: row % channels with
/// per_row = true). mean_out/inv_std_out (may be null) receive each row's statistics.
struct RowNorm {
  long long rows = 0, len = 0;
  long long channels = 1;
  bool per_row = false;
  float epsilon = 1e-5f;
};
void launch_row_norm(const RowNorm& p, const float* x, const float* scale, const float* bias, float* y,
                     float* mean_out, float* inv_std_out, cudaStream_t stream);

// ---- matmul.cu ----
/// Y[b] = act(alpha · op(A[b]) · op(B[b]) + beta · C + bias + residual), Y contiguous [batch, M, N].
/// Operands by strides (transposes and broadcast batches are strides; 0 repeats).
struct GemmParams {
  int batch, m, n, k;
  long long a_batch, a_m, a_k;
  long long b_batch, b_k, b_n;
  const float* c = nullptr;  // Gemm's C, broadcast by strides
  long long c_m = 0, c_n = 0;
  float alpha = 1.f, beta = 0.f;
  Epilogue epilogue;  // bias over N, residual of Y's shape, activation
};
void launch_gemm(const GemmParams& p, const float* a, const float* b, float* y, cudaStream_t stream);

// ---- data_movement.cu ----
/// dst[i] = src[base + Σ_d idx_d(i) · strides[d]] over dims (transpose, slice, expand), for
/// elements of 1, 2, 4 or 8 bytes.
struct StridedCopy {
  int rank = 0;
  long long dims[kMaxDims] = {};
  long long strides[kMaxDims] = {};
  long long base = 0;
};
void launch_strided_copy(const void* src, void* dst, std::size_t element_bytes, long long n, const StridedCopy& p,
                         cudaStream_t stream);

// ---- gather_scatter.cu ----
/// Gather, GatherElements, GatherND, ScatterElements and ScatterND (reduction none). Indices are
/// int64 (indices_i64) or int32; data, updates and outputs are elements of 1, 2, 4 or 8 bytes,
/// moved as bytes. A negative index counts from the back. An index outside [-extent, extent)
/// makes a gather write zero bytes for what it addresses and a scatter skip it (the reference
/// kernels throw; plan() checks the indices known on the host). Scatters write into y, which
/// holds a copy of data already: with duplicate indices one of the updates of an element wins,
/// which one is not determined (ONNX leaves it unspecified; the reference kernel takes the last).

/// Gather: y[o, j, i] = data[o, indices[j], i] for o < outer, j < count, i < inner.
void launch_gather(const void* data, const void* indices, bool indices_i64, void* y, std::size_t element_bytes,
                   long long outer, long long extent, long long count, long long inner, cudaStream_t stream);

/// GatherElements / ScatterElements: element p of the indices (the output of a gather, the
/// updates of a scatter) addresses data at p with coordinate `axis` replaced by its index.
struct ElementIndexing {
  int rank = 0;
  int axis = 0;
  long long dims[kMaxDims] = {};          // the indices' shape
  long long data_strides[kMaxDims] = {};  // data's contiguous strides
  long long extent = 0;                   // data's extent along axis
};
/// y[p] = data[address of p] for the n elements of the indices.
void launch_gather_elements(const void* data, const void* indices, bool indices_i64, void* y,
                            std::size_t element_bytes, long long n, const ElementIndexing& p, cudaStream_t stream);
/// y[address of p] = updates[p] for the n elements of the indices.
void launch_scatter_elements(const void* indices, bool indices_i64, const void* updates, void* y,
                             std::size_t element_bytes, long long n, const ElementIndexing& p, cudaStream_t stream);

/// GatherND / ScatterND: index tuple t (m coordinates, the indices' last axis) addresses the
/// `slice` contiguous data elements at (t / per_batch) · batch_elems + Σ_k coordinate_k · strides[k].
struct NdIndexing {
  int m = 1;
  long long extents[kMaxDims] = {};  // data's extents along the indexed axes
  long long strides[kMaxDims] = {};  // data's strides along them
  long long per_batch = 1;           // tuples per batch (batch_dims), at least 1
  long long batch_elems = 0;         // data elements per batch
  long long slice = 1;               // elements each tuple addresses, at least 1
};
/// y[t · slice + j] = data[address of t + j] for the n = tuples · slice output elements.
void launch_gather_nd(const void* data, const void* indices, bool indices_i64, void* y, std::size_t element_bytes,
                      long long n, const NdIndexing& p, cudaStream_t stream);
/// y[address of t + j] = updates[t · slice + j] for the n = tuples · slice update elements.
void launch_scatter_nd(const void* indices, bool indices_i64, const void* updates, void* y,
                       std::size_t element_bytes, long long n, const NdIndexing& p, cudaStream_t stream);

// ---- top_k.cu ----
/// The largest k launch_top_k takes (its selection is sorted in shared memory).
inline constexpr long long kTopKMaxK = 4096;
/// TopK along the middle axis of [outer, len, inner] (len below 2^31): for each of the outer ·
/// inner rows, the k (<= kTopKMaxK) largest values (smallest with largest = false) in order, and
/// their positions along the axis, into [outer, k, inner]. Equal values come in the order of
/// their positions; NaN ranks above every number (first when largest, last otherwise), as the
/// reference kernel. values or indices may be null (an unused output).
void launch_top_k(const float* x, float* values, long long* indices, long long outer, long long len, long long inner,
                  long long k, bool largest, cudaStream_t stream);

// ---- grid_sample.cu ----
/// GridSample (opset 16; opset 20's linear and cubic on 4-D inputs): X [n, c, h, w] read at the
/// normalized (x, y) locations of grid [n, ho, wo, 2] into Y [n, c, ho, wo], with the reference
/// kernel's arithmetic (backends/cpu/reference/grid_sample.cpp: the location clamped or reflected
/// before its taps are taken; Keys' cubic with a = -0.75; nearest rounds half to even).
enum class GridSampleMode : int { kBilinear, kNearest, kBicubic };
enum class GridSamplePadding : int { kZeros, kBorder, kReflection };
struct GridSampleParams {
  long long n = 0, c = 0, h = 0, w = 0, ho = 0, wo = 0;
  GridSampleMode mode = GridSampleMode::kBilinear;
  GridSamplePadding padding = GridSamplePadding::kZeros;
  bool align_corners = false;
};
void launch_grid_sample(const GridSampleParams& p, const float* x, const float* grid, float* y, cudaStream_t stream);

// ---- cast.cu ----
/// Element types of Cast on the GPU (DType's f32, f16, i64, i32, u8, bool).
enum class CastType : int { kF32, kF16, kI64, kI32, kU8, kBool };
/// y[i] = (to) x[i]: floats to integers truncate toward zero (out of range is undefined, as in
/// C++ and ONNX), anything to bool is x != 0, to f16 rounds to nearest even.
void launch_cast(CastType from, CastType to, const void* x, void* y, long long n, cudaStream_t stream);

// ---- pad.cu ----
/// Pad of an fp32 tensor: output index o along each dim reads input index o - begin[d], mapped
/// into the input by the mode (constant: `value` outside; edge: clamped; reflect: mirrored
/// without repeating the border, periodically when the pad exceeds the extent).
enum class PadMode : int { kConstant, kReflect, kEdge };
struct PadParams {
  int rank = 0;
  long long out_dims[kMaxDims] = {};
  long long in_dims[kMaxDims] = {};
  long long begin[kMaxDims] = {};
  PadMode mode = PadMode::kConstant;
  float value = 0.f;
};
void launch_pad(const PadParams& p, const float* x, float* y, long long n, cudaStream_t stream);

// ---- picture_normalize.cu ----
/// A batch of 8-bit pictures [rows, height, width, channels] (interleaved) into a model's fp32
/// input: y = alpha[c] * p + beta[c], NCHW planes or NHWC (core/picture_input.hpp).
struct PictureNormalize {
  long long rows = 0;
  int height = 0, width = 0, channels = 3;  // channels: 3 or 1
  float alpha[3] = {1.f, 1.f, 1.f}, beta[3] = {0.f, 0.f, 0.f};
  bool nchw = true;
};
/// The product and the sum are rounded apart, as redwood::normalize_picture on the host, so the
/// values are the CPU runner's bit for bit. Not captured: the model runner launches it on the
/// slot's stream before the plan's replay.
void launch_picture_normalize(const PictureNormalize& p, const std::uint8_t* x, float* y, cudaStream_t stream);

}  // namespace redwood::cuda::kernels
