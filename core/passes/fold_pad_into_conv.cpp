// A zero Pad of the spatial axes whose only reader is a Conv folds into the Conv's pads:
//
//   Pad(x, pads = [0, 0, b1..bk, 0, 0, e1..ek], mode constant, value 0) -> Conv(pads = [p..])
//       becomes  Conv(x, pads = [p_begin + b, p_end + e])
//
// A Conv's padding is zero padding of its input, whatever its strides, dilations and groups, so
// the two are the same computation. TensorFlow exports (tf2onnx) write the asymmetric padding of
// a stride-2 'SAME' Conv as an explicit Pad before it; folded, the Conv pads in its own kernel.
//
// The Pad must be mode "constant" with value 0 (opset < 11: the `pads` and `value` attributes;
// opset >= 11: a constant `pads` input, and `constant_value` absent or a constant 0; no `axes`
// input), pad neither N nor C, have no negative pad, and feed the Conv's data input only. The
// Conv (not ConvTranspose, whose pads crop its output) must have auto_pad NOTSET or absent.

#include "core/passes/graph_utils.hpp"
#include "core/passes/pass_manager.hpp"

#include <fmt/format.h>

namespace redwood::passes {
namespace {

// The Pad's per-axis pads [begin..., end...] when it is a constant-mode zero pad; empty otherwise.
std::vector<std::int64_t> zero_pads(const Graph& g, const Node& pad) {
  if (pad.attr_string("mode", "constant") != "constant") return {};
  if (g.opset < 11) {
    if (pad.inputs.size() > 1 || pad.attr_float("value", 0.0f) != 0.0f) return {};
    return pad.attr_ints(pad.has_attr("paddings") ? "paddings" : "pads");
  }
  if (pad.inputs.size() > 3 && !pad.inputs[3].empty()) return {};
  if (pad.has_input(2)) {
    const Tensor* value = g.find_initializer(pad.inputs[2]);
    float v = 0.0f;
    if (!detail::scalar_value(value, v) || v != 0.0f) return {};
  }
  const Tensor* pads = pad.has_input(1) ? g.find_initializer(pad.inputs[1]) : nullptr;
  if (pads == nullptr || pads->dtype() != DType::kI64) return {};
  return pads->contiguous().to_int64_vector();
}

}  // namespace

void fold_pad_into_conv(Graph& g, std::vector<std::string>& log) {
  std::vector<bool> dead(g.nodes.size(), false);
  const detail::Uses uses(g);
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& pad = g.nodes[i];
    if (pad.op_type != "Pad" || !pad.domain.empty() || pad.outputs.size() != 1 || !pad.has_input(0)) continue;
    const std::size_t j = uses.sole_consumer(pad.outputs[0]);
    if (j == std::string::npos) continue;
    Node& conv = g.nodes[j];
    if (conv.op_type != "Conv" || !conv.domain.empty() || conv.inputs.empty() || conv.inputs[0] != pad.outputs[0]) continue;
    const std::string auto_pad = conv.attr_string("auto_pad", "NOTSET");
    if (auto_pad != "NOTSET" && !auto_pad.empty()) continue;
    const Tensor* w = conv.has_input(1) ? g.find_initializer(conv.inputs[1]) : nullptr;
    if (w == nullptr || w->rank() < 3) continue;
    const std::int64_t rank = w->rank(), spatial = rank - 2;
    const std::vector<std::int64_t> pads = zero_pads(g, pad);
    if (static_cast<std::int64_t>(pads.size()) != 2 * rank) continue;
    bool ok = pads[0] == 0 && pads[1] == 0 && pads[rank] == 0 && pads[rank + 1] == 0;
    for (const auto p : pads) ok = ok && p >= 0;
    std::vector<std::int64_t> conv_pads = conv.attr_ints("pads", std::vector<std::int64_t>(2 * spatial, 0));
    if (!ok || static_cast<std::int64_t>(conv_pads.size()) != 2 * spatial) continue;
    for (std::int64_t a = 0; a < spatial; ++a) {
      conv_pads[a] += pads[2 + a];
      conv_pads[spatial + a] += pads[rank + 2 + a];
    }
    log.push_back(fmt::format("folded {} into {}", pad.where(), conv.where()));
    conv.attributes["pads"] = conv_pads;
    conv.attributes.erase("auto_pad");
    conv.inputs[0] = pad.inputs[0];
    dead[i] = true;
  }
  detail::erase_nodes(g, dead);
}

}  // namespace redwood::passes
