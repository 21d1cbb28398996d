// rw.ConvNhwc on the GPU (docs/cuda.md, Kernels, the rw.ConvNhwc row): a dense 2-D
// convolution on NHWC activations, X [N, H, W, C] and W [K, R, S, C] in the storage type S
// (fp16 or bf16; or fp32: at precision tf32 the products round the operands to tf32, at precision
// fp32 each product is three tf32 ones of split operands, "3xTF32", fp32-accurate), bias fp32 [K]
// (input 2, optional), residual S [N, OH, OW, K] (input 3, optional), the Conv's fused activation;
// output S [N, OH, OW, K]. C is a multiple of 8 (fp32: of 4), K of 8. Input 4, optional: the
// projection shortcut's input X2 S [N, H2, W2, C2] (backends/cuda/passes/fuse_conv_shortcut.cpp) of a 1×1
// stride-1 convolution, W [K, 1, 1, C + C2]: y also sums X2 at stride `rw.shortcut_strides`
// times W's last C2 channels.
// The tile and split-K count are picked per shape by timing (tune(), like the Conv kernel's
// tuner in conv.cpp) and cached process-wide.

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/cuda_kernel.hpp"
#include "backends/cuda/kernels/conv/conv_kernels.hpp"
#include "backends/cuda/kernels/conv_nhwc/conv_nhwc.hpp"
#include "backends/cuda/kernels/conv_nhwc/conv_nhwc_narrow.hpp"
#include "backends/cuda/kernels/elementwise/fused_epilogue.hpp"
#include "backends/cuda/kernels/variant_tuner.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/ops/names.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace redwood::cuda {
namespace {

using kernels::ConvShape;
using kernels::NhwcConvConfig;

// The families beyond the mma.sync tiles a layer may take on this GPU under these options: the
// Hopper wgmma tiles where they can run (16-bit storage or fp32 at tf32, not 3xTF32; a compute
// capability 9.0 GPU), the TMA-fed among them, and the narrow kernel's (16-bit storage).
kernels::NhwcFamilies families_for(kernels::NhwcStorage storage, bool split_tf32, const CudaOptions& options) {
  kernels::NhwcFamilies f;
  f.wgmma = options.wgmma && !split_tf32 && kernels::nhwc_wgmma_usable();
  f.tma = f.wgmma && options.tma;
  f.narrow = options.narrow_conv && storage != kernels::NhwcStorage::kF32;
  return f;
}
int families_bits(const kernels::NhwcFamilies& f) { return (f.wgmma ? 1 : 0) | (f.tma ? 2 : 0) | (f.narrow ? 4 : 0); }

// What the tuner may pick from for a shape.
std::vector<NhwcConvConfig> tuner_candidates(const ConvShape& p, kernels::NhwcStorage storage,
                                             const kernels::NhwcFamilies& families) {
  return kernels::nhwc_conv_candidates(p, multiprocessor_count(), families, storage);
}

// ---- the tuner's process-wide cache: one pick per (shape, storage type, families, device) ----
using TuneKey = std::array<int, 20>;
// `split_tf32`: fp32 storage's 3xTF32 products (precision fp32), other kernels than tf32's. The
// families: runners whose options offer other candidates keep picks of their own.
TuneKey tune_key(const ConvShape& p, kernels::NhwcStorage s, bool split_tf32, const kernels::NhwcFamilies& f,
                 int device) {
  return {p.n, p.c, p.h, p.w, p.k, p.r, p.s, p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.dil_h, p.dil_w,
          p.oh * 65536 + p.ow, static_cast<int>(s) * 2 + (split_tf32 ? 1 : 0), device,
          p.c2,                p.h2 * 65536 + p.w2, p.stride2, families_bits(f)};
}
TuneKey tune_key(const ConvShape& p, kernels::NhwcStorage s, bool split_tf32, const kernels::NhwcFamilies& f) {
  int device = 0;
  cudaGetDevice(&device);
  return tune_key(p, s, split_tf32, f, device);
}

// ---- its picks in the plan cache (PickCodec, variant_tuner.hpp): the shape's fields by name
// (the key's packed ones apart), the storage type, the tile by name ----
constexpr const char* kShapeFields[13] = {"n",        "c",        "h",     "w",     "k",     "r",    "s",
                                          "stride_h", "stride_w", "pad_h", "pad_w", "dil_h", "dil_w"};

nlohmann::json write_pick(const TuneKey& key, const NhwcConvConfig& config) {
  nlohmann::json shape;
  for (int i = 0; i < 13; ++i) shape[kShapeFields[i]] = key[static_cast<std::size_t>(i)];
  shape["oh"] = key[13] / 65536;
  shape["ow"] = key[13] % 65536;
  shape["storage"] = nhwc_storage_names()[static_cast<std::size_t>(key[14] / 2)];
  shape["split_tf32"] = key[14] % 2 == 1;
  shape["c2"] = key[16];
  shape["h2"] = key[17] / 65536;
  shape["w2"] = key[17] % 65536;
  shape["stride2"] = key[18];
  shape["families"] = {{"wgmma", (key[19] & 1) != 0}, {"tma", (key[19] & 2) != 0}, {"narrow", (key[19] & 4) != 0}};
  return {{"key", shape},
          {"config",
           {{"tile", kernels::nhwc_conv_tiles()[static_cast<std::size_t>(config.tile)].name},
            {"splits", config.splits}}}};
}

// A pick is usable when its config is one of the candidates plan() offers the shape on this GPU.
std::pair<TuneKey, NhwcConvConfig> read_pick(const nlohmann::json& pick, int device) {
  constexpr int kMax = 1 << 30, kMaxExtent = 65535;  // the key packs (oh, ow) and (h2, w2) in 16 bits each
  const nlohmann::json& key = pick.at("key");
  ConvShape p{};
  p.groups = 1;
  int* fields[13] = {&p.n,        &p.c,        &p.h,     &p.w,     &p.k,     &p.r,    &p.s,
                     &p.stride_h, &p.stride_w, &p.pad_h, &p.pad_w, &p.dil_h, &p.dil_w};
  for (int i = 0; i < 13; ++i) *fields[i] = pick_int(key, kShapeFields[i], i == 9 || i == 10 ? 0 : 1, kMax);
  p.oh = pick_int(key, "oh", 1, kMaxExtent);
  p.ow = pick_int(key, "ow", 1, kMaxExtent);
  p.c2 = pick_int(key, "c2", 0, kMax);
  p.h2 = pick_int(key, "h2", 0, kMaxExtent);
  p.w2 = pick_int(key, "w2", 0, kMaxExtent);
  p.stride2 = pick_int(key, "stride2", 1, kMax);
  const auto storage = static_cast<kernels::NhwcStorage>(pick_name(key, "storage", nhwc_storage_names()));
  const auto split = key.find("split_tf32");
  RW_EXPECTS(split != key.end() && split->is_boolean(), InvalidArgument, "\"split_tf32\" is missing or not true/false");
  kernels::NhwcFamilies families;
  const auto fam = key.find("families");
  RW_EXPECTS(fam != key.end() && fam->is_object(), InvalidArgument, "\"families\" is missing or not an object");
  for (auto [name, flag] : {std::pair{"wgmma", &families.wgmma}, {"tma", &families.tma}, {"narrow", &families.narrow}}) {
    const auto v = fam->find(name);
    RW_EXPECTS(v != fam->end() && v->is_boolean(), InvalidArgument, "families' \"{}\" is missing or not true/false", name);
    *flag = v->get<bool>();
  }
  // The families the pick was made among must still run here (wgmma: a compute capability 9.0 GPU).
  RW_EXPECTS(!families.wgmma || kernels::nhwc_wgmma_usable(), InvalidArgument,
             "the pick was made among the wgmma tiles, which this GPU does not run");
  const nlohmann::json& c = pick.at("config");
  std::vector<std::string> tiles;
  for (const kernels::NhwcTile& t : kernels::nhwc_conv_tiles()) tiles.emplace_back(t.name);
  NhwcConvConfig config;
  config.tile = pick_name(c, "tile", tiles);
  config.splits = pick_int(c, "splits", 1, 1 << 10);
  const auto candidates = tuner_candidates(p, storage, families);
  RW_EXPECTS(std::find(candidates.begin(), candidates.end(), config) != candidates.end(), InvalidArgument,
             "tile {} split {} is not among the {} candidates this GPU offers the shape", c.at("tile").dump(),
             config.splits, candidates.size());
  return {tune_key(p, storage, split->get<bool>(), families, device), config};
}

using TuneCache = PickCache<TuneKey, NhwcConvConfig>;
TuneCache& tune_cache() {
  static TuneCache cache("conv_nhwc", {write_pick, read_pick});
  return cache;
}
// Made at static initialization, so that the plan cache can seed it before any plan.
[[maybe_unused]] const bool tune_cache_made = (tune_cache(), true);

const char* dtype_label(DType d) { return dtype_name(d).data(); }

class ConvNhwcKernel final : public CudaKernel {
 public:
  ConvNhwcKernel(const Node& node, const KernelInfo& /*info*/)
      : node_(node), round_tf32_(node.attr_int(ops::attr::kRoundTf32, 0) != 0) {
    epilogue_ = fused_activation(node);
  }

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    const TensorDesc& x = info.input(0);
    const TensorDesc& w = info.input(1);
    RW_EXPECTS(x.dtype == DType::kF16 || x.dtype == DType::kBF16 || x.dtype == DType::kF32, Unsupported,
               "{}: rw.ConvNhwc takes fp16, bf16 or fp32 activations, not {}", node_.where(), dtype_label(x.dtype));
    // fp32 storage multiplies on the tf32 tensor cores: operands rounded to tf32 at precision tf32,
    // split into three tf32 products (fp32-accurate) at precision fp32; not at fp16/bf16.
    RW_EXPECTS(x.dtype != DType::kF32 || info.precision == Precision::kTf32 || info.precision == Precision::kFp32,
               Unsupported,
               "{}: rw.ConvNhwc on fp32 activations multiplies in tf32 (precision tf32) or 3xTF32 (precision "
               "fp32), not at precision {}",
               node_.where(), precision_name(info.precision));
    split_tf32_ = x.dtype == DType::kF32 && info.precision == Precision::kFp32;
    RW_EXPECTS(w.dtype == x.dtype, InvalidArgument, "{}: weights are {}, the activations {} (one storage type)",
               node_.where(), dtype_label(w.dtype), dtype_label(x.dtype));
    RW_EXPECTS(x.shape.size() == 4 && w.shape.size() == 4, InvalidArgument,
               "{}: rw.ConvNhwc takes X [N, H, W, C] and W [K, R, S, C], not {} and {}", node_.where(),
               shape_str(x.shape), shape_str(w.shape));
    RW_EXPECTS(node_.attr_int("group", 1) == 1, Unsupported, "{}: rw.ConvNhwc is dense (group 1), not group {}",
               node_.where(), node_.attr_int("group", 1));
    const std::int64_t c = x.shape[3], k = w.shape[0];
    const int c_align = x.dtype == DType::kF32 ? 4 : 8;  // channels of a 16-byte chunk
    const std::int64_t c2 = info.has_input(4) && info.input(4).shape.size() == 4 ? info.input(4).shape[3] : 0;
    RW_EXPECTS(w.shape[3] == c + c2, InvalidArgument, "{}: weights {} for {} input channels", node_.where(),
               shape_str(w.shape), c + c2);
    RW_EXPECTS(c % c_align == 0 && k % 8 == 0 && c > 0 && k > 0, InvalidArgument,
               "{}: rw.ConvNhwc needs C a multiple of {} (16-byte vectors of {}) and K of 8, not C {} and K {}",
               node_.where(), c_align, dtype_label(x.dtype), c, k);
    const auto strides = node_.attr_ints("strides", {1, 1});
    const auto pads = node_.attr_ints("pads", {0, 0, 0, 0});
    const auto dil = node_.attr_ints("dilations", {1, 1});
    RW_EXPECTS(strides.size() == 2 && pads.size() == 4 && dil.size() == 2, InvalidArgument,
               "{}: strides/pads/dilations have {}/{}/{} values, not 2/4/2", node_.where(), strides.size(),
               pads.size(), dil.size());
    std::int64_t out[2];
    for (int i = 0; i < 2; ++i) {
      RW_EXPECTS(strides[i] > 0 && dil[i] > 0 && pads[i] >= 0 && pads[i + 2] >= 0, InvalidArgument,
                 "{}: strides, dilations must be positive and pads non-negative", node_.where());
      const std::int64_t ext = (w.shape[1 + i] - 1) * dil[i] + 1;
      out[i] = (x.shape[1 + i] + pads[i] + pads[i + 2] - ext) / strides[i] + 1;
      RW_EXPECTS(out[i] > 0, InvalidArgument, "{}: input {} is smaller than the kernel {}", node_.where(),
                 shape_str(x.shape), shape_str(w.shape));
    }
    const Shape y = {x.shape[0], out[0], out[1], k};
    std::int64_t stride2 = 1;
    if (info.has_input(4)) {
      const TensorDesc& x2 = info.input(4);
      const auto s2 = node_.attr_ints(ops::attr::kShortcutStrides, {1, 1});
      RW_EXPECTS(w.shape[1] == 1 && w.shape[2] == 1 && strides[0] == 1 && strides[1] == 1 && dil[0] == 1 &&
                     dil[1] == 1 && pads[0] == 0 && pads[1] == 0 && pads[2] == 0 && pads[3] == 0,
                 InvalidArgument, "{}: a shortcut input (input 4) needs a 1x1 stride-1 convolution without padding",
                 node_.where());
      RW_EXPECTS(s2.size() == 2 && s2[0] == s2[1] && s2[0] > 0, InvalidArgument,
                 "{}: rw.shortcut_strides must be two equal positive values", node_.where());
      stride2 = s2[0];
      RW_EXPECTS(x2.dtype == x.dtype && x2.shape.size() == 4 && x2.shape[0] == x.shape[0] &&
                     (x2.shape[1] - 1) / stride2 + 1 == out[0] && (x2.shape[2] - 1) / stride2 + 1 == out[1] &&
                     c2 % c_align == 0 && c2 > 0,
                 InvalidArgument,
                 "{}: the shortcut input must be {} [N, H2, W2, C2] with (H2 - 1) / {} + 1 = {} and C2 a multiple of "
                 "{}, not {} {}",
                 node_.where(), dtype_label(x.dtype), stride2, out[0], c_align, dtype_label(x2.dtype),
                 shape_str(x2.shape));
      RW_EXPECTS(shape_numel(x2.shape) < (1LL << 31), Unsupported,
                 "{}: rw.ConvNhwc indexes with 32 bits: the shortcut input {} is too large", node_.where(),
                 shape_str(x2.shape));
    }
    RW_EXPECTS(x.shape[0] * x.shape[1] * x.shape[2] * c < (1LL << 31) && shape_numel(y) < (1LL << 31) &&
                   w.shape[1] * w.shape[2] * c < (1LL << 31),
               Unsupported, "{}: rw.ConvNhwc indexes with 32 bits: input {} or output {} is too large", node_.where(),
               shape_str(x.shape), shape_str(y));
    if (info.has_input(2)) {
      RW_EXPECTS(info.input(2).dtype == DType::kF32 && shape_numel(info.input(2).shape) == k, InvalidArgument,
                 "{}: bias must be fp32 with {} values, not {} {}", node_.where(), k,
                 dtype_label(info.input(2).dtype), shape_str(info.input(2).shape));
    }
    if (info.has_input(3)) {
      const TensorDesc& r = info.input(3);
      RW_EXPECTS(r.dtype == x.dtype && r.shape == y, InvalidArgument,
                 "{}: the residual must be {} {} (the output), not {} {}", node_.where(), dtype_label(x.dtype),
                 shape_str(y), dtype_label(r.dtype), shape_str(r.shape));
    }
    dtype_ = x.dtype;
    storage_ = dtype_ == DType::kF16    ? kernels::NhwcStorage::kF16
               : dtype_ == DType::kBF16 ? kernels::NhwcStorage::kBF16
                                        : kernels::NhwcStorage::kF32;
    shape_ = ConvShape{static_cast<int>(x.shape[0]), static_cast<int>(c), static_cast<int>(x.shape[1]),
                       static_cast<int>(x.shape[2]), static_cast<int>(k), static_cast<int>(w.shape[1]),
                       static_cast<int>(w.shape[2]), static_cast<int>(out[0]), static_cast<int>(out[1]),
                       static_cast<int>(strides[0]), static_cast<int>(strides[1]), static_cast<int>(pads[0]),
                       static_cast<int>(pads[1]), static_cast<int>(dil[0]), static_cast<int>(dil[1]), 1};
    if (info.has_input(4)) {
      shape_.c2 = static_cast<int>(c2);
      shape_.h2 = static_cast<int>(info.input(4).shape[1]);
      shape_.w2 = static_cast<int>(info.input(4).shape[2]);
      shape_.stride2 = static_cast<int>(stride2);
    }
    config_ = kernels::nhwc_conv_default(shape_, multiprocessor_count(), storage_);
    families_ = families_for(storage_, split_tf32_, info.options);
    candidates_ = tuner_candidates(shape_, storage_, families_);
    how_ = "default";
    // Split-K counters from the process-wide pool (zero between launches), enough for any split
    // candidate, so a split launch needs no memset (which would cut the programmatic launch chain).
    long long tiles = 0;
    for (const NhwcConvConfig& cfg : candidates_) {
      if (cfg.splits > 1) tiles = std::max(tiles, kernels::nhwc_conv_tile_count(shape_, cfg));
    }
    if (config_.splits > 1) tiles = std::max(tiles, kernels::nhwc_conv_tile_count(shape_, config_));
    counters_ = kernels::SplitKCounters(static_cast<int>(std::min<long long>(tiles, 1 << 20)));
    return {{dtype_, y}};
  }

  // Enough for any candidate (the tuner may pick any of them).
  std::size_t workspace_bytes() const override {
    std::size_t bytes = kernels::nhwc_conv_workspace_bytes(shape_, config_);
    for (const NhwcConvConfig& c : candidates_) bytes = std::max(bytes, kernels::nhwc_conv_workspace_bytes(shape_, c));
    return bytes;
  }

  // As the Conv kernel's tuner (conv.cpp), by tune_variants (variant_tuner.hpp): the fastest mean
  // wins (ties to the earlier candidate). Cached per shape and storage type; past the
  // plan's budget a new shape keeps (and caches) the default, so every plan runs the same kernel.
  void tune(const LaunchArgs& a, TuneBudget& budget) override {
    if (candidates_.size() <= 1) return;
    VariantTimes t;
    const TuneOutcome outcome = tune_variants(tune_cache(), tune_key(shape_, storage_, split_tf32_, families_), candidates_,
                                              config_, budget, a.stream, [&] { launch(a); }, &t);
    how_ = tune_outcome_text(outcome, t);
    if (outcome != TuneOutcome::kMeasured) return;
    log().debug("nhwc conv tuning (tile/splits:ms) {}; picked {}", variant_timings(t, [&](std::size_t i) {
                  return fmt::format("{}/{}", kernels::nhwc_conv_tiles()[static_cast<std::size_t>(candidates_[i].tile)].name,
                                     candidates_[i].splits);
                }),
                variant());
  }

  std::string variant() const override {
    return fmt::format("{}: nhwc{} {} split {} ({})", node_.where(), split_tf32_ ? " 3xtf32" : "",
                       kernels::nhwc_conv_tiles()[static_cast<std::size_t>(config_.tile)].name, config_.splits, how_);
  }

  void launch(const LaunchArgs& a) override {
    const float* bias = a.inputs.size() > 2 ? static_cast<const float*>(a.inputs[2].data) : nullptr;
    const void* residual = a.inputs.size() > 3 ? a.inputs[3].data : nullptr;
    const void* x2 = a.inputs.size() > 4 ? a.inputs[4].data : nullptr;
    int* counters = nullptr;
    if (config_.splits > 1 && kernels::nhwc_conv_tile_count(shape_, config_) <= counters_.count()) {
      counters = kernels::split_k_counter_address(counters_);
    }
    kernels::launch_conv_nhwc(shape_, storage_, a.inputs[0].data, a.inputs[1].data, a.outputs[0].data, bias,
                              residual, epilogue_, config_, a.workspace, a.stream, counters, split_tf32_,
                              round_tf32_, x2);
  }

 private:
  const Node& node_;
  kernels::Epilogue epilogue_;
  bool round_tf32_;  // rw.round_tf32: fp32 outputs stored rounded to tf32 (the pass at precision tf32)
  ConvShape shape_{};
  DType dtype_ = DType::kF16;
  kernels::NhwcStorage storage_ = kernels::NhwcStorage::kF16;
  bool split_tf32_ = false;                 // fp32 storage at precision fp32: 3xTF32 products
  NhwcConvConfig config_;                   // what launch() runs: the default until tune() picks
  std::vector<NhwcConvConfig> candidates_;  // what tune() may pick from
  kernels::NhwcFamilies families_;          // which families beyond the mma.sync tiles they include
  std::string how_;                         // how config_ was chosen
  kernels::SplitKCounters counters_;        // split-K arrival counters (zero between launches)
};

}  // namespace

RW_REGISTER_CUDA_KERNEL(ops::kConvNhwc, ConvNhwcKernel);

}  // namespace redwood::cuda
