// Epilogue fusion: what follows a Conv, ConvTranspose, Gemm or MatMul folds into it as
// attributes and one extra input (core/ops/epilogue.hpp):
//
//   MatMul -> Add(constant [N])            bias, MatMul's input 2
//   op -> Add(r)                            residual, input 3 (r of the output's very shape)
//   op -> Relu | Clip | HardSigmoid | HardSwish | Sigmoid | LeakyRelu
//                                           rw.activation, rw.alpha, rw.beta
//
// in that order, y = act(op(x) + bias + residual), each step only when the op's output has no
// other reader. The fused node moves to the slot of the last node it absorbed, so that a residual
// produced between the two is computed before it.

#include "core/ops/names.hpp"
#include "core/passes/graph_utils.hpp"
#include "core/passes/pass_manager.hpp"

#include <fmt/format.h>

#include <cmath>

namespace redwood::passes {
namespace {

// Whether two values provably have the same shape (every dimension a known equal extent or the
// same named symbol).
bool same_shape(const Graph& g, const std::string& a, const std::string& b) {
  auto dims = [&](const std::string& v, std::vector<Dim>& out) {
    if (const Tensor* t = g.find_initializer(v)) {
      for (auto d : t->shape()) out.push_back({d, ""});
      return true;
    }
    const ValueInfo* vi = g.find_value(v);
    if (vi == nullptr || !vi->has_shape) return false;
    out = vi->dims;
    return true;
  };
  std::vector<Dim> da, db;
  if (!dims(a, da) || !dims(b, db) || da.size() != db.size()) return false;
  for (std::size_t i = 0; i < da.size(); ++i) {
    const bool equal = (da[i].known() && db[i].known() && da[i].value == db[i].value) ||
                       (!da[i].known() && !db[i].known() && !da[i].symbol.empty() && da[i].symbol == db[i].symbol);
    if (!equal) return false;
  }
  return true;
}

bool is_fusable_op(const Node& n) {
  return n.domain.empty() && n.outputs.size() == 1 &&
         (n.op_type == "Conv" || n.op_type == "ConvTranspose" || n.op_type == "Gemm" || n.op_type == "MatMul");
}

}  // namespace

void fuse_epilogue(Graph& g, std::vector<std::string>& log) {
  std::vector<bool> dead(g.nodes.size(), false);
  for (std::size_t start = 0; start < g.nodes.size(); ++start) {
    if (dead[start] || !is_fusable_op(g.nodes[start]) || g.nodes[start].has_attr(ops::attr::kActivation)) continue;
    std::size_t i = start;
    bool has_bias = g.nodes[i].op_type == "MatMul" ? g.nodes[i].has_input(2) : false;
    bool has_residual = g.nodes[i].has_input(3);
    while (true) {
      detail::Uses uses(g);
      Node& op = g.nodes[i];
      const std::size_t j = uses.sole_consumer(op.outputs[0]);
      if (j == std::string::npos || dead[j]) break;
      const Node& next = g.nodes[j];
      if (!next.domain.empty() || next.outputs.size() != 1) break;
      Node fused = op;
      std::string what;
      if (next.op_type == "Add" && next.inputs.size() == 2 && next.inputs[0] != next.inputs[1]) {
        const std::string& other = next.inputs[0] == op.outputs[0] ? next.inputs[1] : next.inputs[0];
        const Tensor* c = detail::constant_f32(g, other);
        const Tensor* w = op.inputs.size() > 1 ? detail::constant_f32(g, op.inputs[1]) : nullptr;
        if (op.op_type == "MatMul" && !has_bias && !has_residual && c != nullptr && c->rank() == 1 &&
            w != nullptr && w->rank() == 2 && c->numel() == w->dim(1)) {
          fused.inputs.resize(3);
          fused.inputs[2] = other;
          has_bias = true;
          what = "bias";
        } else if (!has_residual && same_shape(g, op.outputs[0], other) &&
                   same_shape(g, op.outputs[0], next.outputs[0])) {
          if (op.op_type == "MatMul" && fused.inputs.size() < 3) fused.inputs.resize(3);
          fused.inputs.resize(4);
          fused.inputs[3] = other;
          has_residual = true;
          what = "residual";
        } else {
          break;
        }
      } else if (next.op_type == "Relu" || next.op_type == "Sigmoid" || next.op_type == "HardSwish") {
        fused.attributes[ops::attr::kActivation] = next.op_type;
        what = "activation";
      } else if (next.op_type == "LeakyRelu") {
        fused.attributes[ops::attr::kActivation] = next.op_type;
        fused.attributes[ops::attr::kAlpha] = next.attr_float("alpha", 0.01f);
        what = "activation";
      } else if (next.op_type == "HardSigmoid") {
        fused.attributes[ops::attr::kActivation] = next.op_type;
        fused.attributes[ops::attr::kAlpha] = next.attr_float("alpha", 0.2f);
        fused.attributes[ops::attr::kBeta] = next.attr_float("beta", 0.5f);
        what = "activation";
      } else if (next.op_type == "Clip") {
        float lo = next.attr_float("min", -INFINITY), hi = next.attr_float("max", INFINITY);
        if (next.has_input(1) && !detail::scalar_value(detail::constant_f32(g, next.inputs[1]), lo)) break;
        if (next.has_input(2) && !detail::scalar_value(detail::constant_f32(g, next.inputs[2]), hi)) break;
        fused.attributes[ops::attr::kActivation] = std::string("Clip");
        fused.attributes[ops::attr::kAlpha] = lo;
        fused.attributes[ops::attr::kBeta] = hi;
        what = "activation";
      } else {
        break;
      }
      log.push_back(fmt::format("fused {} {} into {}", what, next.where(), op.where()));
      fused.outputs[0] = next.outputs[0];
      g.nodes[j] = std::move(fused);
      dead[i] = true;
      i = j;
      if (what == "activation") break;
    }
  }
  detail::erase_nodes(g, dead);
}

}  // namespace redwood::passes
