// HardSwish recognition: exporters spell HardSwish(x) = x * clip(x / 6 + 1/2, 0, 1) out as
//
//   x * HardSigmoid(x)              (alpha 1/6, beta 0.5)
//   x * Clip(x + 3, 0, 6) / 6       (Mul then Div by 6, or Div by 6 then Mul; PP-OCR's form)
//
// Each becomes one HardSwish node (which the epilogue fusion can then fold into a Conv). The
// intermediate values must have no other reader.

#include "core/passes/graph_utils.hpp"
#include "core/passes/pass_manager.hpp"

#include <fmt/format.h>

#include <cmath>

namespace redwood::passes {
namespace {

bool near(float a, float b) { return std::fabs(a - b) <= 1e-6f * std::max(1.0f, std::fabs(b)); }

// The operand of a binary node that is not `v` (empty when both are v or v is absent).
std::string other_input(const Node& n, const std::string& v) {
  if (n.inputs.size() != 2) return "";
  if (n.inputs[0] == v && n.inputs[1] != v) return n.inputs[1];
  if (n.inputs[1] == v && n.inputs[0] != v) return n.inputs[0];
  return "";
}

// n divides `v` by 6 (Div(v, 6) or Mul(v, 1/6)).
bool divides_by_six(const Graph& g, const Node& n, const std::string& v) {
  float c = 0;
  if (n.op_type == "Div" && n.inputs.size() == 2 && n.inputs[0] == v) {
    return detail::scalar_value(detail::constant_f32(g, n.inputs[1]), c) && near(c, 6.0f);
  }
  if (n.op_type == "Mul") {
    return detail::scalar_value(detail::constant_f32(g, other_input(n, v)), c) && near(c, 1.0f / 6.0f);
  }
  return false;
}

// Clip's bounds, from inputs (opset 11+) or attributes.
bool clip_bounds(const Graph& g, const Node& n, float& lo, float& hi) {
  lo = n.attr_float("min", -INFINITY);
  hi = n.attr_float("max", INFINITY);
  if (n.has_input(1) && !detail::scalar_value(detail::constant_f32(g, n.inputs[1]), lo)) return false;
  if (n.has_input(2) && !detail::scalar_value(detail::constant_f32(g, n.inputs[2]), hi)) return false;
  return true;
}

}  // namespace

void recognize_hardswish(Graph& g, std::vector<std::string>& log) {
  detail::Uses uses(g);
  std::vector<bool> dead(g.nodes.size(), false);
  auto rewrite = [&](std::size_t last, const std::string& x, std::initializer_list<std::size_t> removed) {
    Node& n = g.nodes[last];
    log.push_back(fmt::format("{} nodes ending at {} became HardSwish", removed.size() + 1, n.where()));
    n.op_type = "HardSwish";
    n.inputs = {x};
    n.attributes.clear();
    for (std::size_t r : removed) dead[r] = true;
  };
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (dead[i] || !n.domain.empty() || n.outputs.size() != 1) continue;
    if (n.op_type == "HardSigmoid" && n.has_input(0)) {
      if (!near(n.attr_float("alpha", 0.2f), 1.0f / 6.0f) || !near(n.attr_float("beta", 0.5f), 0.5f)) continue;
      const std::string& x = n.inputs[0];
      const std::size_t m = uses.sole_consumer(n.outputs[0]);
      if (m == std::string::npos || dead[m] || g.nodes[m].op_type != "Mul" || other_input(g.nodes[m], n.outputs[0]) != x) continue;
      rewrite(m, x, {i});
    } else if (n.op_type == "Clip" && n.has_input(0)) {
      float lo = 0, hi = 0, three = 0;
      if (!clip_bounds(g, n, lo, hi) || lo != 0.0f || hi != 6.0f) continue;
      // The Clip's input: Add(x, 3) with no other reader.
      std::size_t a = std::string::npos;
      for (std::size_t k = 0; k < i; ++k) {
        if (!dead[k] && g.nodes[k].outputs.size() == 1 && g.nodes[k].outputs[0] == n.inputs[0]) a = k;
      }
      if (a == std::string::npos || g.nodes[a].op_type != "Add" || uses.sole_consumer(n.inputs[0]) != i) continue;
      const Node& add = g.nodes[a];
      std::string x;
      for (int side = 0; side < 2 && x.empty(); ++side) {
        if (detail::scalar_value(detail::constant_f32(g, add.inputs[side]), three) && near(three, 3.0f)) {
          x = add.inputs[1 - side];
        }
      }
      if (x.empty()) continue;
      const std::size_t k = uses.sole_consumer(n.outputs[0]);
      if (k == std::string::npos || dead[k]) continue;
      const Node& first = g.nodes[k];
      const std::size_t l = uses.sole_consumer(first.outputs.empty() ? "" : first.outputs[0]);
      if (l == std::string::npos || dead[l]) continue;
      const Node& second = g.nodes[l];
      if (first.op_type == "Mul" && other_input(first, n.outputs[0]) == x &&
          divides_by_six(g, second, first.outputs[0])) {
        rewrite(l, x, {a, i, k});  // x * clip(x + 3) / 6
      } else if (divides_by_six(g, first, n.outputs[0]) && second.op_type == "Mul" &&
                 other_input(second, first.outputs[0]) == x) {
        rewrite(l, x, {a, i, k});  // x * (clip(x + 3) / 6)
      }
    }
  }
  detail::erase_nodes(g, dead);
}

}  // namespace redwood::passes
