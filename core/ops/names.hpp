#pragma once
// The names of Redwood's own ops and attributes ("rw." — no ONNX operator set has them), spelled
// once: the passes that make them, the kernels that run them and the tests use these. Each is
// declared with its inputs, attributes, types, defaults and meaning in core/ops/schema.cpp.

namespace redwood::ops {

// ---- op types ----
/// Groups of convolutions kept channels-last (the CUDA backend's layout pass).
inline constexpr const char* kToNhwc = "rw.ToNhwc";
inline constexpr const char* kToNchw = "rw.ToNchw";
inline constexpr const char* kConvNhwc = "rw.ConvNhwc";
inline constexpr const char* kDepthwiseConvNhwc = "rw.DepthwiseConvNhwc";
inline constexpr const char* kMaxPoolNhwc = "rw.MaxPoolNhwc";
inline constexpr const char* kGlobalAveragePoolNhwc = "rw.GlobalAveragePoolNhwc";
inline constexpr const char* kScaleChannelsNhwc = "rw.ScaleChannelsNhwc";
/// A chain of elementwise steps run as one node (core/passes/fuse_elementwise.cpp).
inline constexpr const char* kElementwiseChain = "rw.ElementwiseChain";
/// A group of nodes oneDNN runs in its own layouts (core/passes/form_regions.cpp; a composite
/// node whose body holds them).
inline constexpr const char* kOneDnnRegion = "rw.OneDnnRegion";

namespace attr {
// The fused epilogue (core/ops/epilogue.hpp), on Conv, ConvTranspose, Gemm, MatMul, rw.ConvNhwc.
inline constexpr const char* kActivation = "rw.activation";
inline constexpr const char* kAlpha = "rw.alpha";
inline constexpr const char* kBeta = "rw.beta";
// The NHWC ops.
inline constexpr const char* kChannels = "rw.channels";
inline constexpr const char* kRoundTf32 = "rw.round_tf32";
inline constexpr const char* kSpaceToDepth = "rw.space_to_depth";
inline constexpr const char* kSpaceToDepthHw = "rw.space_to_depth_hw";
inline constexpr const char* kShortcutStrides = "rw.shortcut_strides";
// rw.ElementwiseChain.
inline constexpr const char* kSteps = "rw.steps";
inline constexpr const char* kStepAlpha = "rw.step_alpha";
inline constexpr const char* kStepBeta = "rw.step_beta";
inline constexpr const char* kStepOperand = "rw.step_operand";
inline constexpr const char* kStepSwapped = "rw.step_swapped";
}  // namespace attr

}  // namespace redwood::ops
