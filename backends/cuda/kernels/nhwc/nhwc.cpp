// The CudaKernel classes of the NHWC region ops (contract: backends/cuda/passes/choose_gpu_layout.cpp):
// rw.ToNhwc, rw.ToNchw, rw.MaxPoolNhwc, rw.GlobalAveragePoolNhwc, rw.ScaleChannelsNhwc and
// rw.DepthwiseConvNhwc. The storage type S (fp16, bf16 or fp32) is the NHWC input's dtype
// (rw.ToNhwc: its `to` attribute). plan() checks what the kernels rely on (rank 4, C % 8 == 0 for
// every NHWC tensor, except C % 4 == 0 for fp32 ones the conversions take; the attributes the pass
// always writes) and names the node when a graph breaks it.

#include "backends/cuda/cuda_kernel.hpp"
#include "backends/cuda/kernels/elementwise/fused_epilogue.hpp"
#include "backends/cuda/kernels/nhwc/nhwc.hpp"
#include "backends/cuda/kernels/nhwc/nhwc_space_to_depth.hpp"
#include "backends/cuda/kernels/variant_tuner.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/ops/names.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace redwood::cuda {
namespace {

using kernels::kNhwcVec;
using kernels::NhwcStorage;

/// The storage type of an NHWC tensor of `dtype`; Unsupported naming the node otherwise.
NhwcStorage storage_of(const Node& node, DType dtype, const char* what) {
  if (dtype == DType::kF16) return NhwcStorage::kF16;
  if (dtype == DType::kBF16) return NhwcStorage::kBF16;
  if (dtype == DType::kF32) return NhwcStorage::kF32;
  throw Unsupported(fmt::format("{}: {} is {}; the NHWC kernels store float16, bfloat16 or float", node.where(), what,
                                dtype_name(dtype)));
}

DType dtype_of(NhwcStorage s) {
  return s == NhwcStorage::kF16 ? DType::kF16 : s == NhwcStorage::kBF16 ? DType::kBF16 : DType::kF32;
}

/// An NHWC activation [N, H, W, C] with C a multiple of 8 (`conversion`: of a 16-byte vector,
/// 4 channels of fp32); returns its storage type.
NhwcStorage check_nhwc(const Node& node, const TensorDesc& t, const char* what, bool conversion = false) {
  const NhwcStorage s = storage_of(node, t.dtype, what);
  RW_EXPECTS(t.shape.size() == 4, InvalidArgument, "{}: {} is {}, not an NHWC [N, H, W, C] tensor", node.where(),
             what, shape_str(t.shape));
  const int align = conversion ? kernels::nhwc_chunk_channels(s) : kNhwcVec;
  RW_EXPECTS(t.shape[3] % align == 0 && t.shape[3] > 0, InvalidArgument,
             "{}: {} {} has {} channels, not a multiple of {} (the NHWC kernels move {} channels a thread)",
             node.where(), what, shape_str(t.shape), t.shape[3], align, align);
  return s;
}

/// An attribute the pass always writes: `count` ints.
std::vector<std::int64_t> required_ints(const Node& node, const char* key, std::size_t count) {
  RW_EXPECTS(node.has_attr(key), InvalidArgument, "{}: attribute {} is required", node.where(), key);
  const auto v = node.attr_ints(key);
  RW_EXPECTS(v.size() == count, InvalidArgument, "{}: {} has {} values, expected {}", node.where(), key, v.size(),
             count);
  return v;
}

/// rw.round_tf32 (the pass at precision tf32): the node stores its fp32 outputs rounded to tf32.
bool round_tf32(const Node& node) { return node.attr_int(ops::attr::kRoundTf32, 0) != 0; }

std::int64_t required_int(const Node& node, const char* key) {
  RW_EXPECTS(node.has_attr(key), InvalidArgument, "{}: attribute {} is required", node.where(), key);
  return node.attr_int(key, 0);
}

/// The 2-D window attributes of rw.MaxPoolNhwc / rw.DepthwiseConvNhwc, all positive where they
/// must be, pads non-negative.
struct Window {
  std::vector<std::int64_t> strides, pads, dilations;  // pads: top, left, bottom, right
};
Window read_window(const Node& node) {
  Window w{required_ints(node, "strides", 2), required_ints(node, "pads", 4), required_ints(node, "dilations", 2)};
  for (int i = 0; i < 2; ++i) {
    RW_EXPECTS(w.strides[i] > 0 && w.dilations[i] > 0, InvalidArgument, "{}: strides and dilations must be positive",
               node.where());
  }
  for (std::int64_t p : w.pads) RW_EXPECTS(p >= 0, InvalidArgument, "{}: negative pads", node.where());
  return w;
}

int to_int(std::int64_t v) { return static_cast<int>(v); }

class ToNhwcKernel final : public CudaKernel {
 public:
  ToNhwcKernel(const Node& node, const KernelInfo&) : node_(node) {}

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    const TensorDesc& x = info.input(0);
    expect_f32(node_, x.dtype);
    RW_EXPECTS(x.shape.size() == 4, InvalidArgument, "{}: input {} is not an NCHW tensor", node_.where(),
               shape_str(x.shape));
    const std::int64_t to = required_int(node_, "to");
    RW_EXPECTS(to == 10 || to == 16 || to == 1, Unsupported,
               "{}: to = {} ({}); the NHWC storage is float16 (10), bfloat16 (16) or float (1)", node_.where(), to,
               onnx_type_name(static_cast<int>(to)));
    storage_ = to == 10 ? NhwcStorage::kF16 : to == 16 ? NhwcStorage::kBF16 : NhwcStorage::kF32;
    cp_ = required_int(node_, ops::attr::kChannels);
    x_ = x.shape;
    const int align = kernels::nhwc_chunk_channels(storage_);
    space_to_depth_ = node_.attr_int(ops::attr::kSpaceToDepth, 0) != 0;
    if (space_to_depth_) return plan_space_to_depth();
    RW_EXPECTS(cp_ >= x.shape[1] && cp_ % align == 0, InvalidArgument,
               "{}: rw.channels {} must be a multiple of {} (16 bytes of {}) and at least the input's {} channels",
               node_.where(), cp_, align, dtype_name(dtype_of(storage_)), x.shape[1]);
    return {{dtype_of(storage_), {x_[0], x_[2], x_[3], cp_}}};
  }

  void launch(const LaunchArgs& a) override {
    const auto convert = space_to_depth_ ? kernels::launch_to_nhwc_space_to_depth : kernels::launch_to_nhwc;
    convert(storage_, static_cast<const float*>(a.inputs[0].data), a.outputs[0].data, to_int(x_[0]), to_int(x_[1]),
            to_int(x_[2]), to_int(x_[3]), to_int(cp_), a.stream, round_tf32(node_));
  }

 private:
  // rw.space_to_depth = 2 (the stem by space-to-depth, nhwc_space_to_depth.hpp): the input's 2x2
  // space-to-depth, S [N, ceil(H/2), ceil(W/2), cp], for the extent the pass planned it for.
  std::vector<TensorDesc> plan_space_to_depth() {
    RW_EXPECTS(node_.attr_int(ops::attr::kSpaceToDepth, 0) == 2, InvalidArgument,
               "{}: rw.space_to_depth must be 2 (2x2 blocks), not {}", node_.where(),
               node_.attr_int(ops::attr::kSpaceToDepth, 0));
    const auto hw = required_ints(node_, ops::attr::kSpaceToDepthHw, 2);
    RW_EXPECTS(hw[0] == x_[2] && hw[1] == x_[3], InvalidArgument,
               "{}: the space-to-depth stem was planned for a {}x{} input (rw.space_to_depth_hw), not {}",
               node_.where(), hw[0], hw[1], shape_str(x_));
    const std::int64_t c = x_[1];
    RW_EXPECTS(c >= 1 && c <= kernels::kSpaceToDepthMaxChannels, Unsupported,
               "{}: the space-to-depth conversion takes 1 to {} channels, not {}", node_.where(),
               kernels::kSpaceToDepthMaxChannels, c);
    const int need = kernels::space_to_depth_channels(storage_, static_cast<int>(c));
    RW_EXPECTS(cp_ >= need && cp_ % kernels::nhwc_chunk_channels(storage_) == 0, InvalidArgument,
               "{}: rw.channels {} must be a multiple of {} and at least {} (the space-to-depth of {} channels)",
               node_.where(), cp_, kernels::nhwc_chunk_channels(storage_), need, c);
    return {{dtype_of(storage_), {x_[0], (x_[2] + 1) / 2, (x_[3] + 1) / 2, cp_}}};
  }

  const Node& node_;
  NhwcStorage storage_ = NhwcStorage::kF16;
  Shape x_;
  std::int64_t cp_ = 0;
  bool space_to_depth_ = false;
};

class ToNchwKernel final : public CudaKernel {
 public:
  ToNchwKernel(const Node& node, const KernelInfo&) : node_(node) {}

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    storage_ = check_nhwc(node_, info.input(0), "input", /*conversion=*/true);
    x_ = info.input(0).shape;
    c_ = required_int(node_, ops::attr::kChannels);
    RW_EXPECTS(c_ >= 1 && c_ <= x_[3], InvalidArgument, "{}: rw.channels {} for an input of {} channels",
               node_.where(), c_, x_[3]);
    return {{DType::kF32, {x_[0], c_, x_[1], x_[2]}}};
  }

  void launch(const LaunchArgs& a) override {
    kernels::launch_to_nchw(storage_, a.inputs[0].data, static_cast<float*>(a.outputs[0].data), to_int(x_[0]),
                            to_int(c_), to_int(x_[1]), to_int(x_[2]), to_int(x_[3]), a.stream);
  }

 private:
  const Node& node_;
  NhwcStorage storage_ = NhwcStorage::kF16;
  Shape x_;
  std::int64_t c_ = 0;
};

class MaxPoolNhwcKernel final : public CudaKernel {
 public:
  MaxPoolNhwcKernel(const Node& node, const KernelInfo&) : node_(node) {}

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    storage_ = check_nhwc(node_, info.input(0), "input");
    const Shape& x = info.input(0).shape;
    const auto k = required_ints(node_, "kernel_shape", 2);
    const Window win = read_window(node_);
    const bool ceil_mode = required_int(node_, "ceil_mode") != 0;
    std::int64_t out[2];
    for (int i = 0; i < 2; ++i) {
      RW_EXPECTS(k[i] > 0, InvalidArgument, "{}: kernel_shape must be positive", node_.where());
      const std::int64_t in = x[1 + i], ext = (k[i] - 1) * win.dilations[i] + 1;
      const std::int64_t span = in + win.pads[i] + win.pads[2 + i] - ext;
      RW_EXPECTS(span >= 0, InvalidArgument, "{}: input {} is smaller than the window", node_.where(), shape_str(x));
      // As ONNX MaxPool (and pool_resize.cpp): with ceil_mode, a last window that would start in
      // the end padding is dropped.
      out[i] = (ceil_mode ? ceil_div(span, win.strides[i]) : span / win.strides[i]) + 1;
      if (ceil_mode && (out[i] - 1) * win.strides[i] >= in + win.pads[i]) --out[i];
    }
    p_ = kernels::NhwcPoolParams{to_int(x[0]),          to_int(x[1]),          to_int(x[2]),
                                 to_int(x[3]),          to_int(out[0]),        to_int(out[1]),
                                 to_int(k[0]),          to_int(k[1]),          to_int(win.strides[0]),
                                 to_int(win.strides[1]), to_int(win.pads[0]),   to_int(win.pads[1]),
                                 to_int(win.dilations[0]), to_int(win.dilations[1]), round_tf32(node_)};
    return {{dtype_of(storage_), {x[0], out[0], out[1], x[3]}}};
  }

  void launch(const LaunchArgs& a) override {
    kernels::launch_max_pool_nhwc(storage_, p_, a.inputs[0].data, a.outputs[0].data, a.stream);
  }

 private:
  const Node& node_;
  NhwcStorage storage_ = NhwcStorage::kF16;
  kernels::NhwcPoolParams p_{};
};

class GlobalAveragePoolNhwcKernel final : public CudaKernel {
 public:
  GlobalAveragePoolNhwcKernel(const Node& node, const KernelInfo&) : node_(node) {}

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    storage_ = check_nhwc(node_, info.input(0), "input");
    x_ = info.input(0).shape;
    plan_ = info.options.gap_split ? kernels::global_avg_pool_nhwc_plan(to_int(x_[0]), x_[1] * x_[2], to_int(x_[3]),
                                                                        multiprocessor_count())
                                   : kernels::NhwcGapPlan{};
    return {{DType::kF32, {x_[0], x_[3], 1, 1}}};
  }

  std::size_t workspace_bytes() const override {
    return kernels::global_avg_pool_nhwc_workspace(plan_, to_int(x_[0]), to_int(x_[3]));
  }

  std::string variant() const override {
    return fmt::format("{}: {} vectors x {} slices, {} part{}", node_.where(), plan_.vecs, plan_.slices, plan_.parts,
                       plan_.parts == 1 ? "" : "s");
  }

  void launch(const LaunchArgs& a) override {
    kernels::launch_global_avg_pool_nhwc(storage_, a.inputs[0].data, static_cast<float*>(a.outputs[0].data),
                                         to_int(x_[0]), x_[1] * x_[2], to_int(x_[3]), a.stream, plan_,
                                         static_cast<float*>(a.workspace));
  }

 private:
  const Node& node_;
  NhwcStorage storage_ = NhwcStorage::kF16;
  Shape x_;
  kernels::NhwcGapPlan plan_;
};

class ScaleChannelsNhwcKernel final : public CudaKernel {
 public:
  ScaleChannelsNhwcKernel(const Node& node, const KernelInfo&) : node_(node) {}

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    storage_ = check_nhwc(node_, info.input(0), "input 0 (X)");
    x_ = info.input(0).shape;
    const TensorDesc& scale = info.input(1);
    expect_f32(node_, scale.dtype, "input 1 (scale)");
    RW_EXPECTS(shape_numel(scale.shape) == x_[0] * x_[3], InvalidArgument,
               "{}: scale {} for input {}: it needs N·C = {} values", node_.where(), shape_str(scale.shape),
               shape_str(x_), x_[0] * x_[3]);
    return {{dtype_of(storage_), x_}};
  }

  void launch(const LaunchArgs& a) override {
    kernels::launch_scale_channels_nhwc(storage_, a.inputs[0].data, static_cast<const float*>(a.inputs[1].data),
                                        a.outputs[0].data, to_int(x_[0]), x_[1] * x_[2], to_int(x_[3]), a.stream,
                                        round_tf32(node_));
  }

 private:
  const Node& node_;
  NhwcStorage storage_ = NhwcStorage::kF16;
  Shape x_;
};

// ---- rw.DepthwiseConvNhwc's tuner: its candidates, its process-wide cache of picks (one per
// shape, storage type and device), and those picks in the plan cache (PickCodec,
// variant_tuner.hpp: the shape's fields by name, the storage type, the variant's three numbers) ----

// What the tuner may pick from for a shape; also what a plan cache pick is checked against (a pick
// exists only where the tuner ran). Without CudaOptions::depthwise_tuning, the default variant only.
std::vector<kernels::NhwcDepthwiseVariant> depthwise_candidates(NhwcStorage s, const kernels::NhwcDepthwiseParams& p,
                                                                bool tuning = true) {
  return tuning ? kernels::depthwise_nhwc_candidates(s, p)
                : std::vector<kernels::NhwcDepthwiseVariant>{kernels::NhwcDepthwiseVariant{}};
}

using DepthwiseKey = std::array<int, 16>;
DepthwiseKey depthwise_key(const kernels::NhwcDepthwiseParams& p, NhwcStorage s, int device) {
  return {p.n, p.h, p.w, p.c, p.oh, p.ow, p.r, p.s, p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.dil_h, p.dil_w,
          static_cast<int>(s), device};
}
DepthwiseKey depthwise_key(const kernels::NhwcDepthwiseParams& p, NhwcStorage s) {
  int device = 0;
  cudaGetDevice(&device);
  return depthwise_key(p, s, device);
}

constexpr const char* kDepthwiseFields[14] = {"n", "h",        "w",        "c",     "oh",    "ow",    "r",
                                              "s", "stride_h", "stride_w", "pad_h", "pad_w", "dil_h", "dil_w"};

nlohmann::json write_depthwise_pick(const DepthwiseKey& key, const kernels::NhwcDepthwiseVariant& v) {
  nlohmann::json shape;
  for (int i = 0; i < 14; ++i) shape[kDepthwiseFields[i]] = key[static_cast<std::size_t>(i)];
  shape["storage"] = nhwc_storage_names()[static_cast<std::size_t>(key[14])];
  return {{"key", shape}, {"config", {{"vec", v.vec}, {"ox", v.ox}, {"oy", v.oy}}}};
}

// A pick is usable when its variant is one of the candidates plan() offers the shape.
std::pair<DepthwiseKey, kernels::NhwcDepthwiseVariant> read_depthwise_pick(const nlohmann::json& pick, int device) {
  const nlohmann::json& key = pick.at("key");
  kernels::NhwcDepthwiseParams p{};
  int* fields[14] = {&p.n, &p.h,        &p.w,        &p.c,     &p.oh,    &p.ow,    &p.r,
                     &p.s, &p.stride_h, &p.stride_w, &p.pad_h, &p.pad_w, &p.dil_h, &p.dil_w};
  for (int i = 0; i < 14; ++i) *fields[i] = pick_int(key, kDepthwiseFields[i], i == 10 || i == 11 ? 0 : 1, 1 << 30);
  const auto storage = static_cast<NhwcStorage>(pick_name(key, "storage", nhwc_storage_names()));
  const nlohmann::json& c = pick.at("config");
  const kernels::NhwcDepthwiseVariant v{pick_int(c, "vec", 1, 64), pick_int(c, "ox", 1, 64), pick_int(c, "oy", 1, 64)};
  const auto candidates = depthwise_candidates(storage, p);
  const bool offered = std::any_of(candidates.begin(), candidates.end(), [&](const kernels::NhwcDepthwiseVariant& o) {
    return o.vec == v.vec && o.ox == v.ox && o.oy == v.oy;
  });
  RW_EXPECTS(offered, InvalidArgument, "variant {}x{}x{} is not among the {} candidates of the shape", v.vec, v.ox,
             v.oy, candidates.size());
  return {depthwise_key(p, storage, device), v};
}

PickCache<DepthwiseKey, kernels::NhwcDepthwiseVariant>& depthwise_cache() {
  static PickCache<DepthwiseKey, kernels::NhwcDepthwiseVariant> cache("depthwise_nhwc",
                                                                      {write_depthwise_pick, read_depthwise_pick});
  return cache;
}
// Made at static initialization, so that the plan cache can seed it before any plan.
[[maybe_unused]] const bool depthwise_cache_made = (depthwise_cache(), true);

class DepthwiseConvNhwcKernel final : public CudaKernel {
 public:
  DepthwiseConvNhwcKernel(const Node& node, const KernelInfo&) : node_(node), epilogue_(fused_activation(node)) {}

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    storage_ = check_nhwc(node_, info.input(0), "input 0 (X)");
    const Shape& x = info.input(0).shape;
    const TensorDesc& w = info.input(1);
    expect_f32(node_, w.dtype, "input 1 (W)");
    RW_EXPECTS(w.shape.size() == 3 && w.shape[2] == x[3], InvalidArgument,
               "{}: weights {} for input {}: a depthwise filter is [R, S, C] with C = {}", node_.where(),
               shape_str(w.shape), shape_str(x), x[3]);
    bias_ = info.has_input(2);
    if (bias_) {
      expect_f32(node_, info.input(2).dtype, "input 2 (bias)");
      RW_EXPECTS(shape_numel(info.input(2).shape) == x[3], InvalidArgument, "{}: bias {} for {} channels",
                 node_.where(), shape_str(info.input(2).shape), x[3]);
    }
    const Window win = read_window(node_);
    std::int64_t out[2];
    for (int i = 0; i < 2; ++i) {
      const std::int64_t ext = (w.shape[i] - 1) * win.dilations[i] + 1;
      RW_EXPECTS(w.shape[i] > 0, InvalidArgument, "{}: empty filter {}", node_.where(), shape_str(w.shape));
      const std::int64_t span = x[1 + i] + win.pads[i] + win.pads[2 + i] - ext;
      RW_EXPECTS(span >= 0, InvalidArgument, "{}: input {} is smaller than the filter {}", node_.where(), shape_str(x),
                 shape_str(w.shape));
      out[i] = span / win.strides[i] + 1;
    }
    const Shape y = {x[0], out[0], out[1], x[3]};
    residual_ = info.has_input(ops::kResidualInput);
    if (residual_) {
      const TensorDesc& r = info.input(ops::kResidualInput);
      RW_EXPECTS(r.dtype == info.input(0).dtype && r.shape == y, InvalidArgument,
                 "{}: residual {} {}, expected the output's {} {}", node_.where(), dtype_name(r.dtype),
                 shape_str(r.shape), dtype_name(info.input(0).dtype), shape_str(y));
    }
    p_ = kernels::NhwcDepthwiseParams{to_int(x[0]),           to_int(x[1]),           to_int(x[2]),
                                      to_int(x[3]),           to_int(out[0]),         to_int(out[1]),
                                      to_int(w.shape[0]),     to_int(w.shape[1]),     to_int(win.strides[0]),
                                      to_int(win.strides[1]), to_int(win.pads[0]),    to_int(win.pads[1]),
                                      to_int(win.dilations[0]), to_int(win.dilations[1]), round_tf32(node_)};
    config_ = kernels::NhwcDepthwiseVariant{};
    candidates_ = depthwise_candidates(storage_, p_, info.options.depthwise_tuning);
    how_ = candidates_.size() > 1 ? "default: not tuned" : "the only variant";
    return {{dtype_of(storage_), y}};
  }

  // As the convolution tuners (variant_tuner.hpp): the fastest variant of the shape, cached for the
  // process. Every variant gives the same bits, so the pick changes only the time.
  void tune(const LaunchArgs& a, TuneBudget& budget) override {
    if (candidates_.size() <= 1) return;
    VariantTimes t;
    const TuneOutcome outcome = tune_variants(depthwise_cache(), depthwise_key(p_, storage_), candidates_, config_,
                                              budget, a.stream, [&] { launch(a); }, &t);
    how_ = tune_outcome_text(outcome, t);
    if (outcome != TuneOutcome::kMeasured) return;
    log().debug("depthwise NHWC tuning (variant:ms) {}; picked {}",
                variant_timings(t, [&](std::size_t i) { return kernels::depthwise_nhwc_variant_name(p_, candidates_[i]); }),
                variant());
  }

  std::string variant() const override {
    return fmt::format("{}: depthwise NHWC {} ({})", node_.where(), kernels::depthwise_nhwc_variant_name(p_, config_),
                       how_);
  }

  void launch(const LaunchArgs& a) override {
    const float* bias = bias_ ? static_cast<const float*>(a.inputs[2].data) : nullptr;
    const void* residual = residual_ ? a.inputs[ops::kResidualInput].data : nullptr;
    kernels::launch_depthwise_nhwc(storage_, p_, a.inputs[0].data, static_cast<const float*>(a.inputs[1].data), bias,
                                   residual, a.outputs[0].data, epilogue_, a.stream, config_);
  }

 private:
  const Node& node_;
  kernels::Epilogue epilogue_;
  NhwcStorage storage_ = NhwcStorage::kF16;
  kernels::NhwcDepthwiseParams p_{};
  bool bias_ = false, residual_ = false;
  kernels::NhwcDepthwiseVariant config_;                   // what launch() runs
  std::vector<kernels::NhwcDepthwiseVariant> candidates_;  // what tune() may pick from, the default first
  std::string how_;
};

}  // namespace

RW_REGISTER_CUDA_KERNEL(ops::kToNhwc, ToNhwcKernel);
RW_REGISTER_CUDA_KERNEL(ops::kToNchw, ToNchwKernel);
RW_REGISTER_CUDA_KERNEL(ops::kMaxPoolNhwc, MaxPoolNhwcKernel);
RW_REGISTER_CUDA_KERNEL(ops::kGlobalAveragePoolNhwc, GlobalAveragePoolNhwcKernel);
RW_REGISTER_CUDA_KERNEL(ops::kScaleChannelsNhwc, ScaleChannelsNhwcKernel);
RW_REGISTER_CUDA_KERNEL(ops::kDepthwiseConvNhwc, DepthwiseConvNhwcKernel);

}  // namespace redwood::cuda
