// Conv followed by an affine map per output channel folds into the Conv:
//
//   Conv(W, B) -> BatchNormalization(scale, bias, mean, var, eps)
//       W'[oc] = W[oc] * s[oc],  B'[oc] = (B[oc] - mean[oc]) * s[oc] + bias[oc],
//       s = scale / sqrt(var + eps)
//   Conv(W, B) -> Mul(c)     W'[oc] = W[oc] * c[oc], B' = B * c     (c scalar or per channel)
//   Conv(W, B) -> Add(c)     B' = B + c                              (c scalar or per channel)
//
// PaddlePaddle's exports write an inference BatchNorm as Mul and Add by constants, so the last
// two forms matter as much as the first. The Conv's output must have no other reader; the folded
// Conv takes over the name of the removed node's output. W and B are new initializers.
//
// ConvTranspose folds the same way; its weights are [Cin, Cout/group, k...], so output channel
// oc = g * Cout/group + j scales W[ci][j] for the input channels ci of group g.

#include "core/ops/names.hpp"
#include "core/passes/graph_utils.hpp"
#include "core/passes/pass_manager.hpp"

#include <fmt/format.h>

#include <cmath>

namespace redwood::passes {
namespace {

// c as one value per output channel of a Conv output of rank `rank` with `cout` channels
// (a scalar repeats); empty when c does not have that form.
std::vector<float> per_channel(const Tensor* c, std::int64_t rank, std::int64_t cout) {
  if (c == nullptr || c->rank() > rank) return {};
  const Tensor t = c->contiguous();
  if (t.numel() == 1) return std::vector<float>(cout, static_cast<float>(t.get_as_double(0)));
  // Right-aligned against [N, C, spatial...]: every axis 1 except the channel axis.
  const std::int64_t offset = rank - t.rank();
  for (std::int64_t a = 0; a < t.rank(); ++a) {
    const std::int64_t axis = a + offset;
    const std::int64_t extent = t.shape()[a];
    if (axis == 1 ? extent != cout : extent != 1) return {};
  }
  return t.to_float_vector();
}

}  // namespace

void fold_conv_affine(Graph& g, std::vector<std::string>& log) {
  std::vector<bool> dead(g.nodes.size(), false);
  bool changed = true;
  while (changed) {
    changed = false;
    detail::Uses uses(g);
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      Node& conv = g.nodes[i];
      const bool transposed = conv.op_type == "ConvTranspose";
      if (dead[i] || (conv.op_type != "Conv" && !transposed) || !conv.domain.empty() || conv.outputs.size() != 1) continue;
      if (conv.has_attr(ops::attr::kActivation) || conv.inputs.size() > 3) continue;
      const Tensor* w = detail::constant_f32(g, conv.has_input(1) ? conv.inputs[1] : "");
      const Tensor* b = conv.has_input(2) ? detail::constant_f32(g, conv.inputs[2]) : nullptr;
      if (w == nullptr || w->rank() < 3 || (conv.has_input(2) && b == nullptr)) continue;
      const std::size_t j = uses.sole_consumer(conv.outputs[0]);
      if (j == std::string::npos || dead[j]) continue;
      const Node& next = g.nodes[j];
      if (!next.domain.empty()) continue;
      const std::int64_t group = conv.attr_int("group", 1);
      if (group <= 0 || (transposed && w->dim(0) % group != 0)) continue;
      const std::int64_t cout = transposed ? w->dim(1) * group : w->dim(0), rank = w->rank();
      // A malformed Conv (no output channels, a bias of another length, groups that do not
      // divide the channels) is left alone: its kernel names the problem at load.
      if (cout <= 0 || (b != nullptr && b->numel() != cout) || (transposed && w->dim(0) < group)) continue;
      std::vector<float> scale(cout, 1.0f), shift(cout, 0.0f);
      if (next.op_type == "BatchNormalization" && next.inputs.size() == 5) {
        bool used_extra = false;
        for (std::size_t o = 1; o < next.outputs.size(); ++o) used_extra = used_extra || !next.outputs[o].empty();
        const Tensor* p[4];
        bool ok = !used_extra;
        for (int k = 0; k < 4 && ok; ++k) {
          p[k] = detail::constant_f32(g, next.inputs[k + 1]);
          ok = p[k] != nullptr && p[k]->numel() == cout;
        }
        if (!ok) continue;
        const float eps = next.attr_float("epsilon", 1e-5f);
        const auto gamma = p[0]->to_float_vector(), beta = p[1]->to_float_vector();
        const auto mean = p[2]->to_float_vector(), var = p[3]->to_float_vector();
        for (std::int64_t c = 0; c < cout; ++c) {
          scale[c] = gamma[c] / std::sqrt(var[c] + eps);
          shift[c] = beta[c] - mean[c] * scale[c];
        }
      } else if ((next.op_type == "Mul" || next.op_type == "Add") && next.inputs.size() == 2) {
        const std::string& other = next.inputs[0] == conv.outputs[0] ? next.inputs[1] : next.inputs[0];
        if (other == conv.outputs[0]) continue;
        const auto c = per_channel(detail::constant_f32(g, other), rank, cout);
        if (c.empty()) continue;
        if (next.op_type == "Mul") scale = c;
        else shift = c;
      } else {
        continue;
      }
      // W' = W * scale[oc]; B' = B * scale + shift.
      Tensor w2 = w->contiguous().clone();
      float* wp = w2.data<float>();
      if (!transposed) {
        const std::int64_t per_oc = w2.numel() / cout;
        for (std::int64_t oc = 0; oc < cout; ++oc) {
          for (std::int64_t k = 0; k < per_oc; ++k) wp[oc * per_oc + k] *= scale[oc];
        }
      } else {
        const std::int64_t cin = w2.dim(0), per_group_out = w2.dim(1), spatial = w2.numel() / (cin * per_group_out);
        for (std::int64_t ci = 0; ci < cin; ++ci) {
          const std::int64_t g0 = ci / (cin / group) * per_group_out;
          for (std::int64_t j = 0; j < per_group_out; ++j) {
            float* p = wp + (ci * per_group_out + j) * spatial;
            for (std::int64_t k = 0; k < spatial; ++k) p[k] *= scale[g0 + j];
          }
        }
      }
      const std::vector<float> b_old = b ? b->to_float_vector() : std::vector<float>(cout, 0.0f);
      std::vector<float> b_new(cout);
      for (std::int64_t oc = 0; oc < cout; ++oc) b_new[oc] = b_old[oc] * scale[oc] + shift[oc];
      const std::string w_name = detail::fresh_name(g, conv.name + ".W_folded");
      g.initializers[w_name] = w2;
      const std::string b_name = detail::fresh_name(g, conv.name + ".B_folded");
      g.initializers[b_name] = Tensor::from_vector<float>({cout}, b_new);
      log.push_back(fmt::format("folded {} into {}", next.where(), conv.where()));
      // The Conv moves to the removed node's slot (so every reader still comes after it).
      Node folded = conv;
      folded.inputs.resize(3);
      folded.inputs[1] = w_name;
      folded.inputs[2] = b_name;
      folded.outputs[0] = next.outputs[0];
      g.nodes[j] = std::move(folded);
      dead[i] = true;
      changed = true;
      uses = detail::Uses(g);
    }
  }
  detail::erase_nodes(g, dead);
}

}  // namespace redwood::passes
