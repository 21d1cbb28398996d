// Layout choice for the CUDA graph runner: activations between convolutions are kept NHWC in the
// storage type S (what the tensor-core convolution copies in 16-byte vectors: 8 channels of a
// 16-bit type, 4 of fp32) instead of NCHW, with one conversion where a group of such nodes begins
// or ends. S is fp16 or bf16 at those precisions, fp32 at tf32 and fp32 (the runner's choice,
// graph_runner.cpp's nhwc_storage; the convolution rounds its operands to tf32 at tf32 and
// multiplies them as three tf32 products, fp32-accurate, at fp32; activations stay fp32).
//
// Eligible nodes and what they become (the internal ops' contract; their reference kernels are
// backends/cpu/reference/nhwc.cpp, their CUDA kernels backends/cuda/kernels/):
//
//   Conv, group 1, K % 8 == 0      rw.ConvNhwc           X S[N,H,W,Cp], W S[K,R,S,Cp] (transposed,
//                                                        rounded once, C zero-padded to Cp, a
//                                                        multiple of 16 bytes: 8 channels of a
//                                                        16-bit S, 4 of fp32), bias fp32 [K], residual
//                                                        S[N,OH,OW,K] -> S[N,OH,OW,K]
//   Conv, group == C == K, K % 8 == 0   rw.DepthwiseConvNhwc   W fp32 [R,S,C]
//   MaxPool (2-D) of an NHWC value       rw.MaxPoolNhwc
//   GlobalAveragePool of an NHWC value   rw.GlobalAveragePoolNhwc -> fp32 [N,C,1,1] (an exit)
//   Mul of an NHWC value by an fp32 [N,C,1,1] value (squeeze-excite)   rw.ScaleChannelsNhwc
//
//   S is the storage type (kF16, kBF16 or kF32); the convolutions keep their fused epilogue
//   attributes. Every node's output channels are a multiple of 8 whatever S (the pools, scales and
//   depthwise kernels move 8 channels a thread); only a convolution's input from a conversion is
//   padded to Cp, so the stem's 3 image channels become 8 (16-bit) or 4 (fp32).
//
// Conversions: an NCHW value read where an NHWC one is expected goes through one rw.ToNhwc
// (`to`: the ONNX type code of S, `rw.channels`: Cp; padded channels are 0), and an NHWC value
// that a graph output or an NCHW node needs comes back through one rw.ToNchw (`rw.channels`: C)
// under its original name, so graph outputs and the other nodes keep their inputs.
//
// A convolution of a 1x1 plane (the squeeze-excite layers after a global pool) is a matrix product
// and stays NCHW fp32 (the matrix-vector kernel at small batches); so does one whose input the
// graph's value info does not show as a rank-4 image (the pass decides before shapes are known).
//
// Which nodes: the eligible nodes connected through NHWC operands (a convolution's input or
// residual, a pool's, a scale's data) form groups; a group with fewer than two convolutions, or
// with more conversions than convolutions, stays as it was (its conversions would cost more than
// they save). Pools and scales join only when their data comes from a node of a group.
//
// Not numerically identical to the graph it was given at 16-bit S (activations are rounded to S
// between kernels, as at these precisions the operands of every convolution already were); its
// test runs both through the reference kernels within S's tolerance. At fp32 S only the layout
// changes (the reference kernels then agree to fp32 summation order).
//
// tf32 operands (round_tf32, precision tf32 only, fp32 S): every convolution operand is rounded
// to tf32 once, by whoever writes it, so that the tensor cores see exactly-representable values
// (Hopper's wgmma tf32 reads fp32 from shared memory and truncates the 13 low mantissa bits, a
// bias that compounds through a network; mma.sync's cvt.rna on a rounded value is the identity).
// rw.ConvNhwc's weights are rounded here (round_to_tf32: nearest, ties away, as cvt.rna), and
// every NHWC node written (rw.ToNhwc, rw.ConvNhwc, rw.DepthwiseConvNhwc, rw.MaxPoolNhwc,
// rw.ScaleChannelsNhwc) gets `rw.round_tf32` = 1: its kernel rounds its stored fp32 outputs to
// tf32. rw.GlobalAveragePoolNhwc's fp32 NCHW output (squeeze-excite) is left as it is.
//
// The stem by space-to-depth (space_to_depth_stem, the runner's CudaOptions::space_to_depth_stem):
// a convolution of the group with stride 2, dilation 1, at most 4 input channels
// and a kernel of at least 3x3, whose input enters through a conversion (the network's image) and
// whose H and W the value info knows, becomes a stride-1 convolution over the 2x2 space-to-depth
// of its input (space_to_depth.hpp, this folder, has the algebra) when that shrinks its padded
// K-dim R·S·Cp: ResNet's 7x7/2 stem over 3 channels (7·7·8 = 392 at 16-bit storage) becomes
// 4x4/1 over 12 channels padded to 16 (256). Its input comes from its own rw.ToNhwc with
// `rw.space_to_depth` = 2 and `rw.space_to_depth_hw` = [H, W] (the input extent the pads were
// computed for; the kernels reject another), which writes S [N, ceil(H/2), ceil(W/2), Cp] with
// channel (dy·2 + dx)·C + c of pixel (Y, X) = x[n, c, 2Y + dy, 2X + dx] (0 past the input and
// from 4C to Cp), so the rearrangement costs no pass of its own; the weights are rearranged here
// (space_to_depth_weights, then transposed and padded as any rw.ConvNhwc's), strides become 1 and
// the pads the algebra's. At fp32 storage (Cp = 4C) only a 7x7 kernel qualifies, and saves next
// to no K-dim (7·7·4 = 196 against 4·4·12 = 192); it is taken for the loads' sake: three
// contiguous 16-byte chunks per window position instead of one (the stem 15 % faster on the H200,
// docs/results/2026-11-30-h200-kernels.md).

#include "backends/cuda/passes/gpu_pipeline.hpp"
#include "backends/cuda/passes/space_to_depth.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/ops/names.hpp"
#include "core/ops/tf32.hpp"
#include "core/passes/graph_utils.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <optional>

namespace redwood::passes {
namespace {

enum class Kind { kNone, kConv, kDepthwise, kMaxPool, kGlobalAveragePool, kScale };

// Output channels of every NHWC node: a multiple of 8 (the companion kernels' vectors).
constexpr std::int64_t kChannelAlign = 8;
// The most input channels of a convolution taken by space-to-depth: 4C fits two 16-byte chunks
// of a 16-bit type (16 channels).
constexpr std::int64_t kSpaceToDepthMaxChannels = 4;
// A convolution input's channels padded to whole 16-byte chunks of the storage type.
std::int64_t align_channels(std::int64_t c, DType storage) {
  const std::int64_t chunk = 16 / static_cast<std::int64_t>(dtype_size(storage));
  return (c + chunk - 1) / chunk * chunk;
}

// The fp32 rank-4 weights of a 2-D convolution, or nullptr.
const Tensor* conv_weights(const Graph& g, const Node& n) {
  if (n.op_type != "Conv" || !n.domain.empty() || !n.has_input(0)) return nullptr;
  const Tensor* w = detail::constant_f32(g, n.has_input(1) ? n.inputs[1] : "");
  if (w == nullptr || w->shape().size() != 4) return nullptr;
  if (n.attr_string("auto_pad", "NOTSET") != "NOTSET") return nullptr;
  if (n.has_input(2)) {
    const ValueInfo* b = g.find_value(n.inputs[2]);
    const Tensor* bias = g.find_initializer(n.inputs[2]);
    const DType t = bias != nullptr ? bias->dtype() : (b != nullptr ? b->dtype : DType::kUndefined);
    if (t != DType::kF32) return nullptr;
  }
  return w;
}

Kind conv_kind(const Graph& g, const Node& n) {
  const Tensor* w = conv_weights(g, n);
  if (w == nullptr) return Kind::kNone;
  const std::int64_t k = w->shape()[0], group = n.attr_int("group", 1);
  if (k % kChannelAlign != 0) return Kind::kNone;
  if (group == 1) return Kind::kConv;
  if (group == k && w->shape()[1] == 1) return Kind::kDepthwise;
  return Kind::kNone;
}

bool plain_max_pool(const Node& n) {
  return n.op_type == "MaxPool" && n.domain.empty() && n.attr_ints("kernel_shape").size() == 2 &&
         n.attr_string("auto_pad", "NOTSET") == "NOTSET" && n.attr_int("storage_order", 0) == 0 &&
         (n.outputs.size() == 1 || n.outputs[1].empty());
}

bool same_dim(const Dim& a, const Dim& b) {
  if (a.known() || b.known()) return a.known() && b.known() && a.value == b.value;
  return !a.symbol.empty() && a.symbol == b.symbol;
}

// Whether `scale` is an fp32 [N, C, 1, 1] value whose N is the data's, so Mul(data, scale) scales
// each image's channels (squeeze-excite).
bool channel_scale(const Graph& g, const std::string& data, const std::string& scale, std::int64_t channels) {
  const ValueInfo* d = g.find_value(data);
  const ValueInfo* s = g.find_value(scale);
  if (d == nullptr || s == nullptr || !d->has_shape || !s->has_shape || s->dtype != DType::kF32) return false;
  if (d->dims.size() != 4 || s->dims.size() != 4) return false;
  return same_dim(s->dims[0], d->dims[0]) && s->dims[1].known() && s->dims[1].value == channels &&
         s->dims[2].known() && s->dims[2].value == 1 && s->dims[3].known() && s->dims[3].value == 1;
}

// Union-find over node indices, for the groups.
struct Groups {
  std::vector<std::size_t> parent;
  explicit Groups(std::size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  std::size_t find(std::size_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  }
  void join(std::size_t a, std::size_t b) { parent[find(a)] = find(b); }
};

// The NHWC operands of a node of each kind (input indices).
std::vector<std::size_t> nhwc_operands(Kind kind, std::size_t scale_data) {
  switch (kind) {
    case Kind::kConv:
    case Kind::kDepthwise: return {0, 3};
    case Kind::kMaxPool:
    case Kind::kGlobalAveragePool: return {0};
    case Kind::kScale: return {scale_data};
    default: return {};
  }
}

// The spatial attributes of a 2-D window op with ONNX's defaults filled in.
void copy_window(const Node& from, Node& to, bool pool) {
  to.attributes["strides"] = from.attr_ints("strides", {1, 1});
  to.attributes["pads"] = from.attr_ints("pads", {0, 0, 0, 0});
  to.attributes["dilations"] = from.attr_ints("dilations", {1, 1});
  if (pool) {
    to.attributes["kernel_shape"] = from.attr_ints("kernel_shape");
    to.attributes["ceil_mode"] = from.attr_int("ceil_mode", 0);
  }
  for (const char* key : {ops::attr::kActivation, ops::attr::kAlpha, ops::attr::kBeta}) {
    auto it = from.attributes.find(key);
    if (it != from.attributes.end()) to.attributes[key] = it->second;
  }
}

class Rewriter {
  using Uses = detail::Uses;

 public:
  Rewriter(Graph& g, DType storage, bool round_tf32, bool space_to_depth)
      : g_(g), storage_(storage), round_tf32_(round_tf32), space_to_depth_(space_to_depth) {}

  void run(std::vector<std::string>& log) {
    for (const Node& n : g_.nodes) node_names_.insert(n.name);
    classify();
    const Uses uses(g_);  // who reads each value, for both steps (the graph is unchanged until rewrite)
    keep_groups_worth_converting(uses);
    std::size_t converted = 0;
    for (bool on : nhwc_) converted += on;
    if (converted == 0) return;
    rewrite(uses);
    remove_unused_initializers();
    log.push_back(fmt::format("{} nodes run NHWC {} ({} to NHWC, {} back to NCHW)", converted, dtype_name(storage_),
                              to_nhwc_, to_nchw_));
    log.insert(log.end(), space_to_depth_log_.begin(), space_to_depth_log_.end());
  }

 private:
  // Which kind each node may become, with its data's channel count; pools and scales only after
  // an NHWC producer (nodes are in topological order).
  void classify() {
    const std::size_t n = g_.nodes.size();
    kind_.assign(n, Kind::kNone);
    scale_data_.assign(n, 0);
    nhwc_.assign(n, false);
    for (std::size_t i = 0; i < n; ++i) {
      const Node& node = g_.nodes[i];
      Kind kind = conv_kind(g_, node);
      if (kind != Kind::kNone && !image_input(node.inputs[0])) kind = Kind::kNone;
      if (kind != Kind::kNone) {
        const Shape& w = g_.find_initializer(node.inputs[1])->shape();
        if (kind == Kind::kDepthwise && w[0] % kChannelAlign != 0) kind = Kind::kNone;
        if (kind != Kind::kNone) channels_[node.outputs[0]] = w[0];
      } else if ((plain_max_pool(node) || (node.op_type == "GlobalAveragePool" && node.domain.empty())) &&
                 node.has_input(0) && channels_.count(node.inputs[0])) {
        kind = node.op_type == "MaxPool" ? Kind::kMaxPool : Kind::kGlobalAveragePool;
        if (kind == Kind::kMaxPool) channels_[node.outputs[0]] = channels_.at(node.inputs[0]);
      } else if (node.op_type == "Mul" && node.domain.empty() && node.inputs.size() == 2) {
        for (std::size_t d = 0; d < 2 && kind == Kind::kNone; ++d) {
          const std::string& data = node.inputs[d];
          auto c = channels_.find(data);
          if (c != channels_.end() && channel_scale(g_, data, node.inputs[1 - d], c->second)) {
            kind = Kind::kScale;
            scale_data_[i] = d;
            channels_[node.outputs[0]] = c->second;
          }
        }
      }
      kind_[i] = kind;
      if (kind != Kind::kNone) producer_[node.outputs[0]] = i;
      if ((node.op_type == "GlobalAveragePool" || node.op_type == "GlobalMaxPool") && !node.outputs.empty()) {
        global_pooled_.insert(node.outputs[0]);
      }
    }
  }

  void keep_groups_worth_converting(const Uses& uses) {
    const std::size_t n = g_.nodes.size();
    Groups groups(n);
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t in : nhwc_operands(kind_[i], scale_data_[i])) {
        const Node& node = g_.nodes[i];
        if (!node.has_input(in)) continue;
        auto p = producer_.find(node.inputs[in]);
        if (p != producer_.end() && kind_[p->second] != Kind::kGlobalAveragePool) groups.join(i, p->second);
      }
    }
    // Per group: convolutions, and the conversions it would need (values entering at NHWC
    // operands, values leaving for graph outputs or other readers).
    std::map<std::size_t, std::size_t> convs;
    std::map<std::size_t, std::set<std::string>> conversions;
    for (std::size_t i = 0; i < n; ++i) {
      if (kind_[i] == Kind::kNone) continue;
      const std::size_t group = groups.find(i);
      const Node& node = g_.nodes[i];
      if (kind_[i] == Kind::kConv || kind_[i] == Kind::kDepthwise) ++convs[group];
      for (std::size_t in : nhwc_operands(kind_[i], scale_data_[i])) {
        if (!node.has_input(in)) continue;
        auto p = producer_.find(node.inputs[in]);
        if (p == producer_.end() || kind_[p->second] == Kind::kGlobalAveragePool) {
          conversions[group].insert("in:" + node.inputs[in]);
        }
      }
      if (kind_[i] == Kind::kGlobalAveragePool) continue;
      const std::string& v = node.outputs[0];
      bool leaves = uses.graph_outputs.count(v) != 0;
      if (uses.count(v) != 0) {
        for (std::size_t reader : uses.consumers.at(v)) {
          leaves |= kind_[reader] == Kind::kNone || !reads_only_nhwc_slots(reader, v);
        }
      }
      if (leaves) conversions[group].insert("out:" + v);
    }
    // Two convolutions at least, and no more conversions than convolutions: each conversion is
    // a pass over its tensor, about what NHWC saves a convolution.
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t group = groups.find(i);
      nhwc_[i] = kind_[i] != Kind::kNone && convs[group] >= 2 && convs[group] >= conversions[group].size();
    }
    // A pool or scale whose producer stayed NCHW cannot be NHWC (its group is the producer's).
  }

  // Whether a convolution's input is known to be an image: rank 4 in the graph's value info
  // (what shape inference left) and not a 1x1 plane. A convolution of a 1x1 plane (squeeze-excite
  // after a global pool) is a matrix product on [N, C] and stays on the NCHW kernels (the
  // matrix-vector path at small batches); one whose input shape is unknown stays too.
  bool image_input(const std::string& x) const {
    if (global_pooled_.count(x)) return false;
    const ValueInfo* vi = g_.find_value(x);
    if (vi == nullptr || !vi->has_shape || vi->dims.size() != 4) return false;
    return !(vi->dims[2].known() && vi->dims[2].value == 1 && vi->dims[3].known() && vi->dims[3].value == 1);
  }

  bool produced_nhwc(const std::string& value) const {
    auto p = producer_.find(value);
    return p != producer_.end() && nhwc_[p->second] && kind_[p->second] != Kind::kGlobalAveragePool;
  }

  ValueInfo permuted_info(const std::string& original, const std::string& name, std::int64_t cp) const {
    ValueInfo vi;
    vi.name = name;
    vi.dtype = storage_;
    vi.onnx_type = dtype_to_onnx(storage_);
    const ValueInfo* src = g_.find_value(original);
    if (src != nullptr && src->has_shape && src->dims.size() == 4) {
      vi.has_shape = true;
      vi.dims = {src->dims[0], src->dims[2], src->dims[3], Dim{cp, ""}};
    }
    return vi;
  }

  // The space-to-depth replacement of convolution `node` (header comment), or nullopt where it
  // does not apply: the option off, an input produced NHWC (not the conversion's), a stride other
  // than 2, a dilation, more than 4 channels, a kernel under 3x3, an H or W the value info does not
  // know, a shape the algebra does not cover, or no K-dim saved.
  std::optional<SpaceToDepthConv> space_to_depth_plan(const Node& node) const {
    if (!space_to_depth_ || produced_nhwc(node.inputs[0])) return std::nullopt;
    const Shape& w = g_.find_initializer(node.inputs[1])->shape();
    const std::int64_t c = w[1], r = w[2], s = w[3];
    if (c > kSpaceToDepthMaxChannels || r < 3 || s < 3) return std::nullopt;
    if (node.attr_ints("strides", {1, 1}) != std::vector<std::int64_t>{2, 2} ||
        node.attr_ints("dilations", {1, 1}) != std::vector<std::int64_t>{1, 1}) {
      return std::nullopt;
    }
    const auto pads = node.attr_ints("pads", {0, 0, 0, 0});
    const ValueInfo* x = g_.find_value(node.inputs[0]);
    if (pads.size() != 4 || x == nullptr || !x->has_shape || x->dims.size() != 4 || !x->dims[2].known() ||
        !x->dims[3].known()) {
      return std::nullopt;
    }
    const auto plan =
        plan_space_to_depth_conv(x->dims[2].value, x->dims[3].value, r, s, {pads[0], pads[1], pads[2], pads[3]});
    if (!plan) return std::nullopt;
    const std::int64_t k_dim = r * s * align_channels(c, storage_);
    const std::int64_t s2d_k_dim = plan->kernel_h * plan->kernel_w * align_channels(4 * c, storage_);
    if (s2d_k_dim >= k_dim) return std::nullopt;
    return plan;
  }

  // The space-to-depth NHWC name of an NCHW image read by a convolution taken by space-to-depth:
  // one rw.ToNhwc with rw.space_to_depth per value (header comment).
  std::string to_nhwc_space_to_depth(const std::string& value, std::int64_t channels, std::vector<Node>& out) {
    auto it = space_to_depth_name_.find(value);
    if (it != space_to_depth_name_.end()) return it->second;
    const std::int64_t cp = align_channels(4 * channels, storage_);
    const ValueInfo& src = *g_.find_value(value);  // rank 4 with H and W known (space_to_depth_plan)
    const std::int64_t h = src.dims[2].value, w = src.dims[3].value;
    const std::string name = detail::fresh_name(g_, value + "_nhwc_s2d");
    Node conv = to_nhwc_node(value, name, "_to_nhwc_s2d", cp);
    conv.attributes[ops::attr::kSpaceToDepth] = std::int64_t{2};
    conv.attributes[ops::attr::kSpaceToDepthHw] = std::vector<std::int64_t>{h, w};
    ValueInfo vi;
    vi.name = name;
    vi.dtype = storage_;
    vi.onnx_type = dtype_to_onnx(storage_);
    vi.has_shape = true;
    vi.dims = {src.dims[0], Dim{(h + 1) / 2, ""}, Dim{(w + 1) / 2, ""}, Dim{cp, ""}};
    g_.value_info[name] = vi;
    out.push_back(std::move(conv));
    space_to_depth_name_[value] = name;
    ++to_nhwc_;
    return name;
  }

  // The rw.ToNhwc of `value` into `name` (S, Cp channels; rounded to tf32 where the groups are).
  Node to_nhwc_node(const std::string& value, const std::string& name, const char* suffix, std::int64_t cp) {
    Node conv;
    conv.name = node_name(value + suffix);
    conv.op_type = ops::kToNhwc;
    conv.inputs = {value};
    conv.outputs = {name};
    conv.attributes["to"] = static_cast<std::int64_t>(dtype_to_onnx(storage_));
    conv.attributes[ops::attr::kChannels] = cp;
    if (round_tf32_) conv.attributes[ops::attr::kRoundTf32] = std::int64_t{1};
    return conv;
  }

  // The NHWC name of an NCHW value read by an NHWC node: one rw.ToNhwc per value.
  std::string to_nhwc(const std::string& value, std::int64_t channels, std::vector<Node>& out) {
    auto it = nhwc_name_.find(value);
    if (it != nhwc_name_.end()) return it->second;
    const std::int64_t cp = align_channels(channels, storage_);
    const std::string name = detail::fresh_name(g_, value + "_nhwc");
    Node conv = to_nhwc_node(value, name, "_to_nhwc", cp);
    g_.value_info[name] = permuted_info(value, name, cp);
    out.push_back(std::move(conv));
    nhwc_name_[value] = name;
    ++to_nhwc_;
    return name;
  }

  void rewrite(const Uses& uses) {
    std::vector<Node> out;
    out.reserve(g_.nodes.size() * 2);
    for (std::size_t i = 0; i < g_.nodes.size(); ++i) {
      Node node = std::move(g_.nodes[i]);
      if (!nhwc_[i]) {
        // NCHW readers of NHWC values keep the original names, which rw.ToNchw (below) produces.
        out.push_back(std::move(node));
        continue;
      }
      const Kind kind = kind_[i];
      Node r;
      r.name = node.name;
      r.inputs = node.inputs;
      const std::string original_out = node.outputs[0];
      const std::optional<SpaceToDepthConv> s2d = kind == Kind::kConv ? space_to_depth_plan(node) : std::nullopt;
      for (std::size_t in : nhwc_operands(kind, scale_data_[i])) {
        if (!node.has_input(in)) continue;
        const std::string& v = node.inputs[in];
        if (produced_nhwc(v)) {
          r.inputs[in] = nhwc_name_.at(v);
        } else if (s2d && in == 0) {
          r.inputs[in] = to_nhwc_space_to_depth(v, g_.find_initializer(node.inputs[1])->shape()[1], out);
        } else {
          const std::int64_t c = kind == Kind::kConv && in == 0
                                     ? g_.find_initializer(node.inputs[1])->shape()[1]
                                     : channels_.at(original_out);
          r.inputs[in] = to_nhwc(v, c, out);
        }
      }
      switch (kind) {
        case Kind::kConv: {
          const Tensor& original_w = *g_.find_initializer(node.inputs[1]);
          // Space-to-depth: [K, 4C, k'h, k'w] over the rearranged image (header comment).
          const Tensor w = s2d ? space_to_depth_weights(original_w, *s2d) : original_w;
          r.op_type = ops::kConvNhwc;
          r.inputs[1] = detail::fresh_name(g_, node.inputs[1] + (s2d ? "_nhwc_s2d" : "_nhwc"));
          // [K, R, S, Cp]
          Tensor wt = to_channels_last(w, align_channels(w.shape()[1], storage_), storage_);
          if (round_tf32_) {
            float* v = wt.data<float>();
            for (std::int64_t j = 0; j < wt.numel(); ++j) v[j] = round_to_tf32(v[j]);
          }
          copy_window(node, r, false);
          if (s2d) {
            r.attributes["strides"] = std::vector<std::int64_t>{1, 1};
            r.attributes["pads"] = std::vector<std::int64_t>(s2d->pads.begin(), s2d->pads.end());
            const Shape& ws = original_w.shape();
            space_to_depth_log_.push_back(fmt::format(
                "{}: {}x{}/2 over {} channels as {}x{}/1 over the space-to-depth's {} (K-dim {} -> {})", node.name,
                ws[2], ws[3], ws[1], s2d->kernel_h, s2d->kernel_w, 4 * ws[1],
                ws[2] * ws[3] * align_channels(ws[1], storage_), wt.shape()[1] * wt.shape()[2] * wt.shape()[3]));
          }
          g_.initializers[r.inputs[1]] = std::move(wt);
          break;
        }
        case Kind::kDepthwise: {
          r.op_type = ops::kDepthwiseConvNhwc;
          r.inputs[1] = detail::fresh_name(g_, node.inputs[1] + "_rsc");
          const Tensor& w = *g_.find_initializer(node.inputs[1]);  // [C, 1, R, S] -> [R, S, C]
          const Shape& ws = w.shape();
          g_.initializers[r.inputs[1]] =
              to_channels_last(w.reshaped({1, ws[0], ws[2], ws[3]}), ws[0], DType::kF32).reshaped({ws[2], ws[3], ws[0]});
          copy_window(node, r, false);
          break;
        }
        case Kind::kMaxPool:
          r.op_type = ops::kMaxPoolNhwc;
          copy_window(node, r, true);
          break;
        case Kind::kGlobalAveragePool: r.op_type = ops::kGlobalAveragePoolNhwc; break;
        case Kind::kScale:
          r.op_type = ops::kScaleChannelsNhwc;
          r.inputs = {r.inputs[scale_data_[i]], node.inputs[1 - scale_data_[i]]};
          break;
        default: break;
      }
      if (kind == Kind::kGlobalAveragePool) {
        r.outputs = node.outputs;  // fp32 [N, C, 1, 1]: the same bytes in either layout
        out.push_back(std::move(r));
        continue;
      }
      if (round_tf32_) r.attributes[ops::attr::kRoundTf32] = std::int64_t{1};  // an NHWC fp32 output: rounded
      const std::int64_t c = channels_.at(original_out);
      const std::string name = detail::fresh_name(g_, original_out + "_nhwc");
      g_.value_info[name] = permuted_info(original_out, name, c);
      nhwc_name_[original_out] = name;
      r.outputs = {name};
      out.push_back(std::move(r));
      // Back to NCHW under the original name when a graph output or an NCHW node reads it.
      bool nchw_reader = uses.graph_outputs.count(original_out) != 0;
      if (uses.count(original_out) != 0) {
        for (std::size_t reader : uses.consumers.at(original_out)) nchw_reader |= !reads_only_nhwc(reader, original_out);
      }
      if (nchw_reader) {
        Node back;
        back.name = node_name(original_out + "_to_nchw");
        back.op_type = ops::kToNchw;
        back.inputs = {name};
        back.outputs = {original_out};
        back.attributes[ops::attr::kChannels] = c;
        out.push_back(std::move(back));
        ++to_nchw_;
      }
    }
    g_.nodes = std::move(out);
  }

  void remove_unused_initializers() {
    std::set<std::string> read;
    for (const Node& n : g_.nodes) read.insert(n.inputs.begin(), n.inputs.end());
    for (const auto& o : g_.outputs) read.insert(o.name);
    for (auto it = g_.initializers.begin(); it != g_.initializers.end();) {
      it = read.count(it->first) ? std::next(it) : g_.initializers.erase(it);
    }
  }

  // A node name no other node has.
  std::string node_name(const std::string& base) {
    std::string name = base;
    for (int i = 1; node_names_.count(name); ++i) name = base + "_" + std::to_string(i);
    node_names_.insert(name);
    return name;
  }

  // Whether `reader`, run NHWC, takes `value` only at its NHWC operands (else it needs the NCHW
  // value).
  bool reads_only_nhwc(std::size_t reader, const std::string& value) const {
    return nhwc_[reader] && reads_only_nhwc_slots(reader, value);
  }
  bool reads_only_nhwc_slots(std::size_t reader, const std::string& value) const {
    const Node& n = g_.nodes[reader];
    const std::vector<std::size_t> slots = nhwc_operands(kind_[reader], scale_data_[reader]);
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      if (n.inputs[k] == value && std::find(slots.begin(), slots.end(), k) == slots.end()) return false;
    }
    return true;
  }

  Graph& g_;
  DType storage_;
  bool round_tf32_;  // precision tf32: operands rounded to tf32 by whoever writes them (header comment)
  bool space_to_depth_;  // the stem by space-to-depth (header comment)
  std::vector<Kind> kind_;
  std::vector<std::size_t> scale_data_;
  std::vector<bool> nhwc_;
  std::map<std::string, std::int64_t> channels_;   // channel count of each eligible node's output
  std::map<std::string, std::size_t> producer_;    // eligible node producing a value
  std::map<std::string, std::string> nhwc_name_;   // value -> its NHWC twin
  std::map<std::string, std::string> space_to_depth_name_;  // image -> its space-to-depth NHWC twin
  std::vector<std::string> space_to_depth_log_;             // a line per convolution taken by it
  std::set<std::string> node_names_;
  std::set<std::string> global_pooled_;           // outputs of global pools (1x1 planes)
  std::size_t to_nhwc_ = 0, to_nchw_ = 0;
};

}  // namespace

void choose_gpu_layout(Graph& graph, std::vector<std::string>& log, DType storage, bool round_tf32,
                       bool space_to_depth_stem) {
  RW_EXPECTS(storage == DType::kF16 || storage == DType::kBF16 || storage == DType::kF32, InvalidArgument,
             "choose_gpu_layout keeps activations in float16, bfloat16 or float, not {}", dtype_name(storage));
  RW_EXPECTS(!round_tf32 || storage == DType::kF32, InvalidArgument,
             "choose_gpu_layout rounds tf32 operands only in float storage, not {}", dtype_name(storage));
  Rewriter(graph, storage, round_tf32, space_to_depth_stem).run(log);
}

}  // namespace redwood::passes
