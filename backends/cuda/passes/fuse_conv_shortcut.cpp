// Projection shortcuts into the convolution they feed (after choose_gpu_layout, NHWC only).
//
// A ResNet block that changes its width or stride adds a "downsample" 1x1 convolution of the
// block's input to its last 1x1 convolution:
//
//   d = rw.ConvNhwc(x2, Wd, bd)      1x1, stride s, no activation, no residual
//   y = rw.ConvNhwc(h, Wa, ba, d)    1x1, stride 1, d as its residual, any activation
//
// Both are products over the same output pixels, so y = act(h·Wa + x2[at stride s]·Wd + ba + bd)
// is one 1x1 convolution whose K-dim runs on from h's channels into x2's (sampled at stride s):
//
//   y = rw.ConvNhwc(h, [Wa | Wd], ba + bd, "", x2)   rw.shortcut_strides [s, s]
//
// The downsample's output (as large as y) is then never written nor read back as a residual, and
// one kernel launch goes (backends/cuda/kernels/conv_nhwc/conv_nhwc.cpp reads input 4; the
// reference kernel, backends/cpu/reference/nhwc.cpp, computes both products in fp32). Conditions:
// d's output is read only by y, as its residual; both weights are constants of one storage type
// and output width; d has no activation nor a shortcut of its own; pads 0 and dilations 1 on both.
//
// Numerically, the sum is accumulated in fp32 instead of rounding d to the storage type first.

#include "backends/cuda/passes/gpu_pipeline.hpp"
#include "core/ops/names.hpp"
#include "core/passes/graph_utils.hpp"

#include <fmt/format.h>

#include <cstring>
#include <map>
#include <set>

namespace redwood::passes {
namespace {

// A 1x1 rw.ConvNhwc without padding or dilation, whose weights are a constant [K, 1, 1, C];
// its stride (both ways) in `stride`.
const Tensor* one_by_one(const Graph& g, const Node& n, std::int64_t& stride) {
  if (n.op_type != ops::kConvNhwc || n.inputs.size() < 2) return nullptr;
  const Tensor* w = g.find_initializer(n.inputs[1]);
  if (w == nullptr || w->shape().size() != 4 || w->shape()[1] != 1 || w->shape()[2] != 1) return nullptr;
  const auto strides = n.attr_ints("strides", {1, 1});
  const auto pads = n.attr_ints("pads", {0, 0, 0, 0});
  const auto dil = n.attr_ints("dilations", {1, 1});
  if (strides.size() != 2 || strides[0] != strides[1] || strides[0] < 1) return nullptr;
  if (pads != std::vector<std::int64_t>{0, 0, 0, 0} || dil != std::vector<std::int64_t>{1, 1}) return nullptr;
  stride = strides[0];
  return w;
}

bool input_present(const Node& n, std::size_t i) { return i < n.inputs.size() && !n.inputs[i].empty(); }

// [K, 1, 1, Ca] and [K, 1, 1, Cd] of one dtype, side by side on the last axis.
Tensor concat_channels(const Tensor& a, const Tensor& d) {
  const Tensor ac = a.contiguous(), dc = d.contiguous();
  const std::int64_t k = a.shape()[0], ca = a.shape()[3], cd = d.shape()[3];
  const std::size_t es = dtype_size(a.dtype());
  Tensor out = Tensor::empty(a.dtype(), {k, 1, 1, ca + cd});
  auto* dst = static_cast<unsigned char*>(out.raw_data());
  const auto* sa = static_cast<const unsigned char*>(ac.raw_data());
  const auto* sd = static_cast<const unsigned char*>(dc.raw_data());
  for (std::int64_t row = 0; row < k; ++row) {
    std::memcpy(dst + static_cast<std::size_t>(row * (ca + cd)) * es, sa + static_cast<std::size_t>(row * ca) * es,
                static_cast<std::size_t>(ca) * es);
    std::memcpy(dst + static_cast<std::size_t>(row * (ca + cd) + ca) * es, sd + static_cast<std::size_t>(row * cd) * es,
                static_cast<std::size_t>(cd) * es);
  }
  return out;
}

// The fp32 [K] bias of a node, or nullptr when it has none; false when it is not a constant.
bool constant_bias(const Graph& g, const Node& n, std::int64_t k, const Tensor*& bias) {
  bias = nullptr;
  if (!input_present(n, 2)) return true;
  bias = detail::constant_f32(g, n.inputs[2]);
  return bias != nullptr && bias->numel() == k;
}

}  // namespace

void fuse_conv_shortcut(Graph& g, std::vector<std::string>& log) {
  const detail::Uses uses(g);
  std::map<std::string, std::size_t> producer;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    for (const auto& o : g.nodes[i].outputs) producer[o] = i;
  }
  std::vector<bool> dead(g.nodes.size(), false);
  std::size_t fused = 0;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    Node& a = g.nodes[i];
    std::int64_t stride_a = 0, stride_d = 0;
    const Tensor* wa = one_by_one(g, a, stride_a);
    if (wa == nullptr || stride_a != 1 || !input_present(a, 3) || input_present(a, 4)) continue;
    const auto p = producer.find(a.inputs[3]);
    if (p == producer.end() || dead[p->second] || uses.sole_consumer(a.inputs[3]) != i) continue;
    const Node& d = g.nodes[p->second];
    const Tensor* wd = one_by_one(g, d, stride_d);
    if (wd == nullptr || input_present(d, 3) || input_present(d, 4) || !d.attr_string(ops::attr::kActivation, "").empty()) {
      continue;
    }
    if (wd->dtype() != wa->dtype() || wd->shape()[0] != wa->shape()[0]) continue;
    if (d.attr_int(ops::attr::kRoundTf32, 0) != a.attr_int(ops::attr::kRoundTf32, 0)) continue;
    const std::int64_t k = wa->shape()[0];
    const Tensor *ba = nullptr, *bd = nullptr;
    if (!constant_bias(g, a, k, ba) || !constant_bias(g, d, k, bd)) continue;

    const std::string w_name = detail::fresh_name(g, a.name + "_with_shortcut_w");
    g.initializers[w_name] = concat_channels(*wa, *wd);
    std::string b_name;
    if (ba != nullptr || bd != nullptr) {
      std::vector<float> sum(static_cast<std::size_t>(k), 0.f);
      for (const Tensor* b : {ba, bd}) {
        if (b == nullptr) continue;
        const Tensor bc = b->contiguous();
        for (std::int64_t j = 0; j < k; ++j) sum[static_cast<std::size_t>(j)] += bc.data<float>()[j];
      }
      b_name = detail::fresh_name(g, a.name + "_with_shortcut_b");
      g.initializers[b_name] = Tensor::from_vector<float>({k}, sum);
    }
    log.push_back(fmt::format("{} takes the shortcut {} (1x1, stride {}) as a second input: {} + {} channels",
                              a.name, d.name, stride_d, wa->shape()[3], wd->shape()[3]));
    a.inputs.resize(5);
    a.inputs[1] = w_name;
    a.inputs[2] = b_name;
    a.inputs[3] = "";
    a.inputs[4] = d.inputs[0];
    a.attributes[ops::attr::kShortcutStrides] = std::vector<std::int64_t>{stride_d, stride_d};
    g.value_info.erase(d.outputs[0]);
    dead[p->second] = true;
    ++fused;
  }
  if (fused == 0) return;
  detail::erase_nodes(g, dead);
  std::set<std::string> read;
  for (const Node& n : g.nodes) read.insert(n.inputs.begin(), n.inputs.end());
  for (const auto& o : g.outputs) read.insert(o.name);
  for (auto it = g.initializers.begin(); it != g.initializers.end();) {
    it = read.count(it->first) ? std::next(it) : g.initializers.erase(it);
  }
}

}  // namespace redwood::passes
