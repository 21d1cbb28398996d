// Conv and ConvTranspose on the GPU (2-D, and 1-D as 2-D of height 1), with the fused epilogue of
// core/passes/fuse_epilogue.cpp: bias (input 2), residual (input 3, the output's shape), and
// rw.activation / rw.alpha / rw.beta. Depthwise and other one-channel-per-group convolutions take
// the tiled depthwise kernel (conv_depthwise.cu), or the direct one for shapes it does not take;
// every other convolution the implicit GEMM at the runner's precision, with the tile and split-K
// count the tuner picks per shape (below).

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_kernel.hpp"
#include "backends/cuda/kernels/conv/conv_depthwise.hpp"
#include "backends/cuda/kernels/conv/conv_kernels.hpp"
#include "backends/cuda/kernels/conv/conv_tuning.hpp"
#include "backends/cuda/kernels/elementwise/fused_epilogue.hpp"
#include "backends/cuda/kernels/matmul/gemv.hpp"
#include "backends/cuda/kernels/variant_tuner.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>

namespace redwood::cuda {
namespace {

using kernels::ConvConfig;
using kernels::ConvShape;

// ---- the tuner's process-wide cache: one pick per (shape, precision, device) ----
using TuneKey = std::array<int, 18>;

TuneKey tune_key(const ConvShape& p, kernels::MmaType type, int device) {
  return {p.n,        p.c,        p.h,     p.w,     p.k,     p.r,      p.s,    p.oh,
          p.ow,       p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.dil_h, p.dil_w, p.groups,
          static_cast<int>(type), device};
}

TuneKey tune_key(const ConvShape& p, kernels::MmaType type) {
  int device = 0;
  cudaGetDevice(&device);
  return tune_key(p, type, device);
}

// ---- its picks in the plan cache (PickCodec, variant_tuner.hpp): the shape's fields by name,
// the engine type, the tile by name ----
constexpr const char* kShapeFields[16] = {"n",        "c",        "h",     "w",     "k",     "r",     "s",     "oh",
                                          "ow",       "stride_h", "stride_w", "pad_h", "pad_w", "dil_h", "dil_w", "groups"};
const std::vector<std::string> kTypeNames = {"fp32", "tf32", "fp16", "bf16"};  // MmaType's order

std::vector<std::string> tile_names(kernels::MmaType type) {
  std::vector<std::string> names;
  for (const kernels::ConvTile& t : kernels::conv_tiles(type)) names.emplace_back(t.name);
  return names;
}

nlohmann::json write_pick(const TuneKey& key, const ConvConfig& config) {
  nlohmann::json shape;
  for (int i = 0; i < 16; ++i) shape[kShapeFields[i]] = key[static_cast<std::size_t>(i)];
  const auto type = static_cast<kernels::MmaType>(key[16]);
  shape["type"] = kTypeNames[static_cast<std::size_t>(type)];
  return {{"key", shape},
          {"config",
           {{"tile", kernels::conv_tiles(type)[static_cast<std::size_t>(config.tile)].name},
            {"splits", config.splits},
            {"reduce_in_kernel", config.reduce_in_kernel}}}};
}

// A pick is usable when its config is one of the candidates plan() offers the shape on this GPU.
std::pair<TuneKey, ConvConfig> read_pick(const nlohmann::json& pick, int device) {
  constexpr int kMax = 1 << 30;
  const nlohmann::json& key = pick.at("key");
  ConvShape p{};
  int* fields[16] = {&p.n,        &p.c,        &p.h,     &p.w,     &p.k,     &p.r,     &p.s,     &p.oh,
                     &p.ow,       &p.stride_h, &p.stride_w, &p.pad_h, &p.pad_w, &p.dil_h, &p.dil_w, &p.groups};
  for (int i = 0; i < 16; ++i) {
    const bool pad = i == 11 || i == 12;
    *fields[i] = pick_int(key, kShapeFields[i], pad ? 0 : 1, kMax);
  }
  const auto type = static_cast<kernels::MmaType>(pick_name(key, "type", kTypeNames));
  const nlohmann::json& c = pick.at("config");
  ConvConfig config;
  config.tile = pick_name(c, "tile", tile_names(type));
  config.splits = pick_int(c, "splits", 1, 1 << 10);
  const auto reduce = c.find("reduce_in_kernel");
  RW_EXPECTS(reduce != c.end() && reduce->is_boolean(), InvalidArgument, "\"reduce_in_kernel\" is missing or not true/false");
  config.reduce_in_kernel = reduce->get<bool>();
  const auto candidates = kernels::conv_candidates(p, type, multiprocessor_count());
  RW_EXPECTS(std::find(candidates.begin(), candidates.end(), config) != candidates.end(), InvalidArgument,
             "tile {} split-K {} is not among the {} candidates this GPU offers the shape", c.at("tile").dump(),
             config.splits, candidates.size());
  return {tune_key(p, type, device), config};
}

struct TuneCache {
  PickCache<TuneKey, ConvConfig> picks{"conv", {write_pick, read_pick}};
  std::atomic<std::int64_t> measured{0}, reused{0}, skipped{0};
};
TuneCache& tune_cache() {
  static TuneCache cache;
  return cache;
}
// Made at static initialization, so that the plan cache can seed it before any plan.
[[maybe_unused]] const bool tune_cache_made = (tune_cache(), true);

kernels::MmaType mma_type(Precision p) {
  switch (p) {
    case Precision::kTf32: return kernels::MmaType::kTf32;
    case Precision::kFp16: return kernels::MmaType::kFp16;
    case Precision::kBf16: return kernels::MmaType::kBf16;
    default: return kernels::MmaType::kFp32;
  }
}

// Spatial attributes as 2-D (a 1-D convolution is 2-D with height 1 and kernel height 1).
struct Spatial {
  std::int64_t kernel[2] = {1, 1}, stride[2] = {1, 1}, dil[2] = {1, 1}, pad_begin[2] = {0, 0}, pad_end[2] = {0, 0};
  std::int64_t out_pad[2] = {0, 0};
  std::vector<std::int64_t> output_shape;
  std::string auto_pad;
};

Spatial read_spatial(const Node& node, std::size_t spatial_rank, const Shape& w) {
  RW_EXPECTS(spatial_rank == 1 || spatial_rank == 2, Unsupported,
             "{}: the CUDA kernel handles 1-D and 2-D convolutions, not {}-D", node.where(), spatial_rank);
  Spatial s;
  const std::size_t off = 2 - spatial_rank;  // 1-D fills the width
  auto fill = [&](const char* key, std::int64_t* dst, std::int64_t fallback) {
    const auto v = node.attr_ints(key, std::vector<std::int64_t>(spatial_rank, fallback));
    RW_EXPECTS(v.size() == spatial_rank, InvalidArgument, "{}: {} has {} values for {} spatial axes", node.where(),
               key, v.size(), spatial_rank);
    for (std::size_t i = 0; i < spatial_rank; ++i) dst[off + i] = v[i];
  };
  for (std::size_t i = 0; i < spatial_rank; ++i) s.kernel[off + i] = w[2 + i];
  fill("strides", s.stride, 1);
  fill("dilations", s.dil, 1);
  fill("output_padding", s.out_pad, 0);
  const auto pads = node.attr_ints("pads", std::vector<std::int64_t>(2 * spatial_rank, 0));
  RW_EXPECTS(pads.size() == 2 * spatial_rank, InvalidArgument, "{}: pads has {} values", node.where(), pads.size());
  for (std::size_t i = 0; i < spatial_rank; ++i) {
    s.pad_begin[off + i] = pads[i];
    s.pad_end[off + i] = pads[spatial_rank + i];
  }
  s.auto_pad = node.attr_string("auto_pad", "NOTSET");
  s.output_shape = node.attr_ints("output_shape", {});
  return s;
}

// Shared by Conv and ConvTranspose: operand checks, epilogue inputs, launch arguments.
class ConvBase : public CudaKernel {
 protected:
  ConvBase(const Node& node, const KernelInfo& info) : node_(node) {
    for (std::size_t i = 0; i < info.input_dtypes.size() && i < 4; ++i) expect_f32(node, info.input_dtypes[i]);
    epilogue_ = fused_activation(node);
  }

  // Checks bias and residual against the planned output.
  void check_epilogue(const PlanInfo& info, std::int64_t out_channels, const Shape& out) const {
    if (info.has_input(2)) {
      RW_EXPECTS(shape_numel(info.input(2).shape) == out_channels, InvalidArgument, "{}: bias {} for {} channels",
                 node_.where(), shape_str(info.input(2).shape), out_channels);
    }
    check_fused_residual(info, out);
  }

  // The operands both kernels read: input and weights of one rank, 2-D spatial attributes, group.
  struct Operands {
    Shape x, w;
    std::size_t spatial_rank;
    Spatial sp;
    std::int64_t groups;
    std::int64_t in[2];  // input extent as 2-D
  };
  Operands read_operands(const PlanInfo& info) const {
    Operands o{info.input(0).shape, info.input(1).shape, 0, {}, node_.attr_int("group", 1), {}};
    RW_EXPECTS(o.x.size() >= 3 && o.w.size() == o.x.size(), InvalidArgument, "{}: input {} and weights {}",
               node_.where(), shape_str(o.x), shape_str(o.w));
    o.spatial_rank = o.x.size() - 2;
    o.sp = read_spatial(node_, o.spatial_rank, o.w);
    o.in[0] = o.spatial_rank == 2 ? o.x[2] : 1;
    o.in[1] = o.x[o.x.size() - 1];
    return o;
  }

  // Records the launch shape and returns the output shape [N, k, (oh,) ow].
  Shape set_shape(const Operands& o, std::int64_t k, const std::int64_t out[2], const std::int64_t pad_begin[2]) {
    const Spatial& sp = o.sp;
    shape_ = ConvShape{static_cast<int>(o.x[0]), static_cast<int>(o.x[1]), static_cast<int>(o.in[0]),
                       static_cast<int>(o.in[1]), static_cast<int>(k), static_cast<int>(sp.kernel[0]),
                       static_cast<int>(sp.kernel[1]), static_cast<int>(out[0]), static_cast<int>(out[1]),
                       static_cast<int>(sp.stride[0]), static_cast<int>(sp.stride[1]), static_cast<int>(pad_begin[0]),
                       static_cast<int>(pad_begin[1]), static_cast<int>(sp.dil[0]), static_cast<int>(sp.dil[1]),
                       static_cast<int>(o.groups)};
    Shape y = {o.x[0], k};
    if (o.spatial_rank == 2) y.push_back(out[0]);
    y.push_back(out[1]);
    return y;
  }

  kernels::Epilogue bound_epilogue(const LaunchArgs& a) const {
    kernels::Epilogue e = epilogue_;
    if (a.inputs.size() > 2) e.bias = static_cast<const float*>(a.inputs[2].data);
    if (a.inputs.size() > ops::kResidualInput) e.residual = static_cast<const float*>(a.inputs[ops::kResidualInput].data);
    return e;
  }

  const Node& node_;
  kernels::Epilogue epilogue_;
  ConvShape shape_{};
};

// A 1×1, stride-1, unpadded, ungrouped convolution of at most kGemvMaxRows (32) output pixels in
// all (the squeeze-excite layers on a 1×1 input, batch ≤ 32): a matrix-vector product whose rows
// are the output pixels (row m = image m / HW, pixel m % HW, reading x with stride HW along the
// channels) and whose weights [K][C] are contiguous along C. Exact fp32 (gemv.cu): it is bound by
// reading the weights once, which the implicit GEMM's tiles do slowly.
bool conv_is_gemv(const ConvShape& p) {
  return p.groups == 1 && p.r == 1 && p.s == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_h == 0 &&
         p.pad_w == 0 && p.oh == p.h && p.ow == p.w &&
         static_cast<std::int64_t>(p.n) * p.oh * p.ow <= kernels::kGemvMaxRows;
}

kernels::GemvParams conv_gemv_params(const ConvShape& p) {
  const long long hw = static_cast<long long>(p.oh) * p.ow;
  kernels::GemvParams g;
  g.rows = static_cast<int>(p.n * hw);
  g.n = p.k;
  g.k = p.c;
  g.a_group = hw;
  g.a_group_stride = p.c * hw;
  g.a_m = 1;
  g.a_k = hw;
  g.w_k = 1;
  g.w_n = p.c;
  g.y_group = hw;
  g.y_group_stride = p.k * hw;
  g.y_m = 1;
  g.y_n = hw;
  return g;
}

class ConvKernel final : public ConvBase {
 public:
  ConvKernel(const Node& node, const KernelInfo& info) : ConvBase(node, info) {}

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    const Operands o = read_operands(info);
    const Shape& x = o.x;
    const Shape& w = o.w;
    const Spatial& sp = o.sp;
    const std::int64_t groups = o.groups;
    RW_EXPECTS(groups > 0 && x[1] % groups == 0 && w[0] % groups == 0 && w[1] * groups == x[1], InvalidArgument,
               "{}: {} input channels, weights {}, group {}", node_.where(), x[1], shape_str(w), groups);
    const std::int64_t* in = o.in;
    std::int64_t out[2], pb[2];
    for (int i = 0; i < 2; ++i) {
      const std::int64_t ext = (sp.kernel[i] - 1) * sp.dil[i] + 1;
      pb[i] = sp.pad_begin[i];
      if (sp.auto_pad == "SAME_UPPER" || sp.auto_pad == "SAME_LOWER") {
        out[i] = ceil_div(in[i], sp.stride[i]);
        const std::int64_t total = std::max<std::int64_t>(0, (out[i] - 1) * sp.stride[i] + ext - in[i]);
        pb[i] = sp.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      } else if (sp.auto_pad == "VALID") {
        pb[i] = 0;
        out[i] = (in[i] - ext) / sp.stride[i] + 1;
      } else {
        RW_EXPECTS(sp.auto_pad == "NOTSET", InvalidArgument, "{}: auto_pad '{}'", node_.where(), sp.auto_pad);
        out[i] = (in[i] + sp.pad_begin[i] + sp.pad_end[i] - ext) / sp.stride[i] + 1;
      }
      RW_EXPECTS(out[i] > 0, InvalidArgument, "{}: input {} is smaller than the kernel", node_.where(), shape_str(x));
    }
    const Shape y = set_shape(o, w[0], out, pb);
    check_epilogue(info, w[0], y);
    depthwise_ = w[1] == 1;
    if (depthwise_) dw_tiling_ = kernels::depthwise_tiling(shape_);  // !ok: the direct kernel
    type_ = kernels::conv_engine(shape_, mma_type(info.precision));
    if (!depthwise_) {
      const int sms = multiprocessor_count();
      config_ = kernels::conv_default_config(shape_, type_, sms);
      candidates_ = kernels::conv_candidates(shape_, type_, sms);
      how_ = "default";
    }
    w_constant_ = info.input(1).host != nullptr;  // an initializer: read before pdl_wait (pdl.cuh)
    gemv_ = !depthwise_ && conv_is_gemv(shape_);
    if (gemv_) {  // one way to run: no split-K workspace, nothing to tune
      config_ = {};
      candidates_.clear();
    }
    // Counters for the split-K reduction inside the tensor-core kernel, enough for any split
    // candidate's tiles (SplitKCounters: none where the pool is spent; a separate kernel adds).
    int split_tiles = 0;
    if (!depthwise_ && !gemv_ && type_ != kernels::MmaType::kFp32) {
      for (const ConvConfig& c : candidates_) {
        if (c.splits > 1) split_tiles = std::max(split_tiles, kernels::conv_split_tiles(shape_, type_, c.tile));
      }
      if (config_.splits > 1) split_tiles = std::max(split_tiles, kernels::conv_split_tiles(shape_, type_, config_.tile));
    }
    counters_ = kernels::SplitKCounters(split_tiles);
    return {{DType::kF32, y}};
  }

  // Enough for any candidate's split-K partial sums (the tuner may pick any of them).
  std::size_t workspace_bytes() const override {
    std::size_t bytes = kernels::conv_partial_bytes(shape_, config_.splits);
    for (const ConvConfig& c : candidates_) bytes = std::max(bytes, kernels::conv_partial_bytes(shape_, c.splits));
    return bytes;
  }

  // Times every candidate (tile × split-K) on the plan's stream with the plan's buffers
  // (tune_variants, variant_tuner.hpp: about 1 ms of the default for the clocks, then each
  // candidate once and, unless that is over 3× the best mean, 3 more times between two events).
  // The fastest mean wins, ties to the earlier candidate. Picks are cached process-wide per shape and precision, so identical layers
  // and later plans reuse them; past the plan's budget, a new shape keeps (and caches) the default.
  void tune(const LaunchArgs& a, TuneBudget& budget) override {
    if (depthwise_ || candidates_.size() <= 1) return;
    TuneCache& cache = tune_cache();
    VariantTimes t;
    switch (tune_variants(cache.picks, tune_key(shape_, type_), candidates_, config_, budget, a.stream,
                          [&] { launch(a); }, &t)) {
      case TuneOutcome::kCached:
        how_ = "cached";
        ++cache.reused;
        return;
      case TuneOutcome::kBudgetSpent:
        how_ = "default: the plan's tuning budget is spent";
        ++cache.skipped;
        return;
      case TuneOutcome::kMeasured: break;
    }
    ++cache.measured;
    how_ = fmt::format("measured {:.3f} ms", t.best_ms);
    std::string timings;
    for (std::size_t i = 0; i < candidates_.size(); ++i) {
      timings += fmt::format("{}{}/{}{}:{:.3f}", timings.empty() ? "" : " ",
                             kernels::conv_tiles(type_)[static_cast<std::size_t>(candidates_[i].tile)].name,
                             candidates_[i].splits, candidates_[i].reduce_in_kernel ? "k" : "", t.ms[i]);
    }
    log().debug("conv tuning (tile/splits, k: added in the kernel: ms) {}; picked {}", timings, variant());
  }

  std::string variant() const override {
    if (gemv_) {
      const int rows = conv_gemv_params(shape_).rows;
      return fmt::format("{}: gemv, {} row{} (exact fp32)", node_.where(), rows, rows == 1 ? "" : "s");
    }
    if (depthwise_) {
      return dw_tiling_.ok ? fmt::format("{}: depthwise tiled {}x{}x{}", node_.where(), dw_tiling_.ty,
                                         dw_tiling_.tx * kernels::kDepthwiseVec, dw_tiling_.tc)
                           : fmt::format("{}: depthwise direct", node_.where());
    }
    const char* engine = type_ == kernels::MmaType::kFp32 ? "CUDA cores" : "mma.sync";
    return fmt::format("{}: {} tile {}, split-K {}{} ({})", node_.where(), engine,
                       kernels::conv_tiles(type_)[static_cast<std::size_t>(config_.tile)].name, config_.splits,
                       config_.splits > 1 && config_.reduce_in_kernel ? " added in the kernel" : "", how_);
  }

  void launch(const LaunchArgs& a) override {
    const auto* x = static_cast<const float*>(a.inputs[0].data);
    const auto* w = static_cast<const float*>(a.inputs[1].data);
    auto* y = static_cast<float*>(a.outputs[0].data);
    if (gemv_) {
      kernels::GemvParams g = conv_gemv_params(shape_);
      g.epilogue = bound_epilogue(a);
      g.w_constant = w_constant_;
      kernels::launch_gemv(g, x, w, y, a.stream);
      return;
    }
    if (depthwise_ && dw_tiling_.ok) {
      kernels::launch_conv_depthwise_tiled(shape_, dw_tiling_, x, w, y, bound_epilogue(a), a.stream);
    } else if (depthwise_) {
      kernels::launch_conv_depthwise(shape_, x, w, y, bound_epilogue(a), a.stream);
    } else {
      kernels::launch_conv_implicit_gemm(shape_, x, w, y, bound_epilogue(a), type_, config_,
                                         static_cast<float*>(a.workspace), a.stream, w_constant_, &counters_);
    }
  }

 private:
  bool depthwise_ = false;
  kernels::DepthwiseTiling dw_tiling_;  // depthwise: the tiled kernel's tiling, or !ok
  kernels::MmaType type_ = kernels::MmaType::kFp32;
  ConvConfig config_;                   // what launch() runs: the default until tune() picks
  std::vector<ConvConfig> candidates_;  // what tune() may pick from
  std::string how_;                     // how config_ was chosen
  bool gemv_ = false;                   // launch() runs the matrix-vector kernel (conv_is_gemv)
  bool w_constant_ = false;             // the weights are an initializer (no kernel writes them)
  kernels::SplitKCounters counters_;    // split-K reduced in the kernel (conv_kernels.hpp)
};

class ConvTransposeKernel final : public ConvBase {
 public:
  ConvTransposeKernel(const Node& node, const KernelInfo& info) : ConvBase(node, info) {}

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    const Operands o = read_operands(info);
    const Shape& x = o.x;
    const Shape& w = o.w;
    const Spatial& sp = o.sp;
    const std::size_t sr = o.spatial_rank;
    const std::int64_t groups = o.groups;
    RW_EXPECTS(groups > 0 && x[1] == w[0] && x[1] % groups == 0, InvalidArgument,
               "{}: {} input channels, weights {}, group {}", node_.where(), x[1], shape_str(w), groups);
    const std::int64_t* in = o.in;
    std::int64_t out[2], pb[2];
    for (int i = 0; i < 2; ++i) {
      const std::int64_t ext = (sp.kernel[i] - 1) * sp.dil[i] + 1;
      const std::int64_t full = sp.stride[i] * (in[i] - 1) + sp.out_pad[i] + ext;
      std::int64_t target = -1;
      if (!sp.output_shape.empty()) {
        RW_EXPECTS(sp.output_shape.size() >= sr, InvalidArgument, "{}: output_shape has {} values", node_.where(),
                   sp.output_shape.size());
        target = i == 0 && sr == 1 ? 1 : sp.output_shape[sp.output_shape.size() - (2 - i)];
      } else if (sp.auto_pad == "SAME_UPPER" || sp.auto_pad == "SAME_LOWER") {
        target = in[i] * sp.stride[i];
      }
      if (target >= 0) {
        // ONNX's total padding; negative when output_shape asks for more than the inputs reach
        // (the extra outputs see only the bias). Halved with floor division, as ONNX does.
        const std::int64_t total = full - target;
        const std::int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
        pb[i] = sp.auto_pad == "SAME_UPPER" ? half : total - half;
        out[i] = target;
      } else {
        pb[i] = sp.auto_pad == "VALID" ? 0 : sp.pad_begin[i];
        out[i] = full - pb[i] - (sp.auto_pad == "VALID" ? 0 : sp.pad_end[i]);
      }
      RW_EXPECTS(out[i] > 0, InvalidArgument, "{}: empty output", node_.where());
    }
    const std::int64_t k = w[1] * groups;
    const Shape y = set_shape(o, k, out, pb);
    check_epilogue(info, k, y);
    return {{DType::kF32, y}};
  }

  void launch(const LaunchArgs& a) override {
    kernels::launch_conv_transpose(shape_, static_cast<const float*>(a.inputs[0].data),
                                   static_cast<const float*>(a.inputs[1].data), static_cast<float*>(a.outputs[0].data),
                                   bound_epilogue(a), a.stream);
  }
};

}  // namespace

ConvTuningStats conv_tuning_stats() {
  TuneCache& c = tune_cache();
  return {c.measured.load(), c.reused.load(), c.skipped.load()};
}

bool conv_tuned_config(const kernels::ConvShape& shape, kernels::MmaType type, kernels::ConvConfig* out) {
  return tune_cache().picks.find(tune_key(shape, type), out);
}

RW_REGISTER_CUDA_KERNEL("Conv", ConvKernel);
RW_REGISTER_CUDA_KERNEL("ConvTranspose", ConvTransposeKernel);

}  // namespace redwood::cuda
