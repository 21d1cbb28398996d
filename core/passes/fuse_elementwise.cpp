// Elementwise-chain fusion: a maximal chain of fp32 elementwise nodes, each reading the previous
// one's output (which nothing else reads and which is no graph output), becomes one
// `rw.ElementwiseChain` node whose reference kernel (backends/cpu/reference/elementwise_chain.cpp)
// applies every step to a block of elements while it is in cache: one pass over memory instead
// of one per node, and no intermediate tensors.
//
// Steps: Relu, Sigmoid, Tanh, Sqrt, HardSigmoid, HardSwish, LeakyRelu, Clip (constant bounds),
// and Add/Sub/Mul/Div/Pow whose other operand is a constant fp32 that broadcasts to the data
// without changing its shape: one element, or a block of consecutive axes matching the data's
// (per channel [C,1,1], a trailing vector [D]). The data shape is the chain input's (every step
// keeps it); a non-scalar operand needs those axes known to be equal in the graph's value info.
//
// The fused node (IR contract, read by the kernel):
//   inputs:  0 the chain's input, then the binary steps' constant operands
//   rw.steps           strings, one op type per step
//   rw.step_alpha/beta floats per step: LeakyRelu alpha, HardSigmoid alpha/beta, Clip min/max
//   rw.step_operand    ints per step: the input index of a binary step's constant, -1 for unary
//   rw.step_swapped    ints per step: 1 when the constant is the left operand (c - x, c / x)
//
// The pass runs after form_regions (default_pipeline(true)): a oneDNN region already runs its
// eltwise/binary nodes in place on its own layout, and a chain node inside a run of
// region-accepted nodes would split the region. So it only fuses what stays outside regions.

#include "core/passes/graph_utils.hpp"
#include "core/ops/names.hpp"
#include "core/passes/pass_manager.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace redwood::passes {
namespace {

bool is_unary(const std::string& op) {
  static const std::set<std::string> unary{"Relu", "Sigmoid", "Tanh", "Sqrt", "HardSigmoid",
                                         "HardSwish", "LeakyRelu", "Clip"};
  return unary.count(op) != 0;
}

bool is_binary(const std::string& op) {
  return op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow";
}

// Whether a constant of shape `c` broadcasts to `data` without changing its shape, and its
// non-1 axes are consecutive (what the kernel indexes). `data` may hold unknown dims (-1).
bool operand_fits(const Shape& c, const ValueInfo* data) {
  std::int64_t numel = 1;
  for (auto d : c) numel *= d;
  if (c.empty()) return true;  // a scalar never changes the shape
  if (data == nullptr || !data->has_shape || data->dims.size() < c.size()) return false;
  if (numel == 1) return true;  // [1], [1,1,1]: same rank or less keeps the shape
  const std::size_t offset = data->dims.size() - c.size();
  int blocks = 0;
  bool in_block = false;
  for (std::size_t k = 0; k < c.size(); ++k) {
    const bool wide = c[k] != 1;
    if (wide && (!data->dims[offset + k].known() || data->dims[offset + k].value != c[k])) return false;
    if (wide && !in_block) ++blocks;
    in_block = wide;
  }
  return blocks == 1;
}

// One step of a chain, as the fused node will carry it.
struct Step {
  std::string op;
  float alpha = 0, beta = 0;
  std::string operand;  // a binary step's constant
  bool swapped = false;
};

// Whether node n, reading the data value `v` (shape `data`), can be a step; fills `step`.
bool as_step(const Graph& g, const Node& n, const std::string& v, const ValueInfo* data, Step& step) {
  if (!n.domain.empty() || n.outputs.size() != 1 || n.outputs[0].empty() || !n.body.empty()) return false;
  step = Step();
  step.op = n.op_type;
  if (is_unary(n.op_type)) {
    if (!n.has_input(0) || n.inputs[0] != v) return false;
    if (n.op_type == "LeakyRelu") step.alpha = n.attr_float("alpha", 0.01f);
    if (n.op_type == "HardSigmoid") {
      step.alpha = n.attr_float("alpha", 0.2f);
      step.beta = n.attr_float("beta", 0.5f);
    }
    if (n.op_type == "Clip") {
      // The reference Clip's bounds: absent ones are float's lowest/max, not infinities.
      step.alpha = std::numeric_limits<float>::lowest();
      step.beta = std::numeric_limits<float>::max();
      if (g.opset >= 11) {
        for (std::size_t k = 1; k < n.inputs.size(); ++k) {
          if (n.inputs[k].empty()) continue;
          float bound = 0;
          if (!detail::scalar_value(detail::constant_f32(g, n.inputs[k]), bound)) return false;
          (k == 1 ? step.alpha : step.beta) = bound;
        }
        if (n.inputs.size() > 3) return false;
      } else {
        if (n.inputs.size() > 1) return false;
        if (n.has_attr("min")) step.alpha = n.attr_float("min", 0.0f);
        if (n.has_attr("max")) step.beta = n.attr_float("max", 0.0f);
      }
    } else if (n.inputs.size() != 1) {
      return false;
    }
    return true;
  }
  if (!is_binary(n.op_type) || n.inputs.size() != 2 || n.inputs[0] == n.inputs[1]) return false;
  const int side = n.inputs[0] == v ? 1 : n.inputs[1] == v ? 0 : -1;
  if (side < 0) return false;
  const Tensor* c = detail::constant_f32(g, n.inputs[side]);
  if (c == nullptr || !operand_fits(c->shape(), data)) return false;
  step.operand = n.inputs[side];
  step.swapped = side == 0;
  return true;
}

// What the graph knows of a value (graph inputs may be listed only in g.inputs).
const ValueInfo* value_of(const Graph& g, const std::string& v) {
  if (const ValueInfo* vi = g.find_value(v)) return vi;
  for (const auto& in : g.inputs) {
    if (in.name == v) return &in;
  }
  return nullptr;
}

}  // namespace

void fuse_elementwise(Graph& g, std::vector<std::string>& log) {
  detail::Uses uses(g);
  std::vector<bool> dead(g.nodes.size(), false), taken(g.nodes.size(), false);
  for (std::size_t head = 0; head < g.nodes.size(); ++head) {
    const Node& first = g.nodes[head];
    if (taken[head] || !first.has_input(0)) continue;
    // The chain's data: the head's non-constant input, which must be known to be fp32.
    std::string x = first.inputs[0];
    if (is_binary(first.op_type) && first.inputs.size() == 2 && g.find_initializer(x) != nullptr) {
      x = first.inputs[1];
    }
    const ValueInfo* data = value_of(g, x);
    if (data == nullptr || data->dtype != DType::kF32 || g.find_initializer(x) != nullptr) continue;
    std::vector<Step> steps;
    std::vector<std::size_t> members;
    Step step;
    std::size_t cur = head;
    std::string v = x;
    while (cur != std::string::npos && !taken[cur] && as_step(g, g.nodes[cur], v, data, step)) {
      steps.push_back(step);
      members.push_back(cur);
      v = g.nodes[cur].outputs[0];
      cur = uses.sole_consumer(v);
    }
    if (members.size() < 2) continue;
    for (std::size_t m : members) taken[m] = true;

    Node& last = g.nodes[members.back()];
    std::vector<std::string> inputs{x}, step_ops;
    std::vector<float> alphas, betas;
    std::vector<std::int64_t> operands, swapped;
    std::string names;
    for (const Step& s : steps) {
      step_ops.push_back(s.op);
      alphas.push_back(s.alpha);
      betas.push_back(s.beta);
      swapped.push_back(s.swapped ? 1 : 0);
      if (s.operand.empty()) {
        operands.push_back(-1);
      } else {
        operands.push_back(static_cast<std::int64_t>(inputs.size()));
        inputs.push_back(s.operand);
      }
      names += (names.empty() ? "" : "->") + s.op;
    }
    log.push_back(fmt::format("{} nodes ending at {} became rw.ElementwiseChain ({})", members.size(),
                              last.where(), names));
    last.op_type = ops::kElementwiseChain;
    last.inputs = std::move(inputs);
    last.attributes = {{ops::attr::kSteps, step_ops},
                       {ops::attr::kStepAlpha, alphas},
                       {ops::attr::kStepBeta, betas},
                       {ops::attr::kStepOperand, operands},
                       {ops::attr::kStepSwapped, swapped}};
    for (std::size_t k = 0; k + 1 < members.size(); ++k) dead[members[k]] = true;
  }
  detail::erase_nodes(g, dead);
}

}  // namespace redwood::passes
