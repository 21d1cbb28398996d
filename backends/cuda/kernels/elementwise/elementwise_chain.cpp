// rw.ElementwiseChain on the GPU: the node core/passes/fuse_elementwise.cpp makes (its header
// comment is the IR contract), one launch for the whole chain (elementwise_chain.cu). The steps
// and their broadcast constants are checked as the reference kernel checks them
// (backends/cpu/reference/elementwise_chain.cpp), and give the same results to float rounding.

#include "backends/cuda/cuda_kernel.hpp"
#include "backends/cuda/kernels/elementwise/elementwise_chain.hpp"
#include "core/error.hpp"
#include "core/ops/names.hpp"

#include <algorithm>
#include <variant>

namespace redwood::cuda {
namespace {

using kernels::ChainOp;

ChainOp chain_op(const Node& node, const std::string& name) {
  static const std::pair<const char*, ChainOp> kOps[] = {
      {"Relu", ChainOp::kRelu},         {"Sigmoid", ChainOp::kSigmoid},     {"Tanh", ChainOp::kTanh},
      {"Sqrt", ChainOp::kSqrt},         {"HardSigmoid", ChainOp::kHardSigmoid}, {"HardSwish", ChainOp::kHardSwish},
      {"LeakyRelu", ChainOp::kLeakyRelu}, {"Clip", ChainOp::kClip},         {"Add", ChainOp::kAdd},
      {"Sub", ChainOp::kSub},           {"Mul", ChainOp::kMul},             {"Div", ChainOp::kDiv},
      {"Pow", ChainOp::kPow}};
  for (const auto& [op, value] : kOps) {
    if (name == op) return value;
  }
  throw InvalidArgument(fmt::format("{}: unknown elementwise step '{}'", node.where(), name));
}

// A constant of shape c meets element i of data x at c[(i / inner) % count] when it broadcasts to
// x without changing x's shape and its non-1 axes are consecutive (the reference kernel's rule).
bool broadcast_fits(const Shape& c, const Shape& x, long long& inner, long long& count) {
  count = shape_numel(c);
  inner = 1;
  if (c.size() > x.size()) return false;
  if (count == 1) return true;
  const std::size_t offset = x.size() - c.size();
  std::size_t first = c.size(), last = 0;
  for (std::size_t k = 0; k < c.size(); ++k) {
    if (c[k] == 1) continue;
    if (c[k] != x[offset + k]) return false;
    first = std::min(first, k);
    last = k;
  }
  for (std::size_t k = first; k <= last; ++k) {
    if (c[k] == 1 && x[offset + k] != 1) return false;
  }
  for (std::size_t k = offset + last + 1; k < x.size(); ++k) inner *= x[k];
  return true;
}

class ElementwiseChainKernel final : public CudaKernel {
 public:
  ElementwiseChainKernel(const Node& node, const KernelInfo& info) : node_(node) {
    auto it = node.attributes.find(ops::attr::kSteps);
    const auto* names = it == node.attributes.end() ? nullptr : std::get_if<std::vector<std::string>>(&it->second);
    RW_EXPECTS(names != nullptr, InvalidArgument, "{}: attribute rw.steps (strings) is missing or not strings",
               node.where());
    const auto alpha = node.attr_floats(ops::attr::kStepAlpha);
    const auto beta = node.attr_floats(ops::attr::kStepBeta);
    const auto operand = node.attr_ints(ops::attr::kStepOperand);
    const auto swapped = node.attr_ints(ops::attr::kStepSwapped);
    const std::size_t n = names->size();
    RW_EXPECTS(n > 0 && alpha.size() == n && beta.size() == n && operand.size() == n && swapped.size() == n,
               InvalidArgument,
               "{}: rw.steps, rw.step_alpha, rw.step_beta, rw.step_operand and rw.step_swapped must list the same "
               "number (>0) of steps",
               node.where());
    for (std::size_t k = 0; k < n; ++k) {
      kernels::ChainStep s;
      s.op = chain_op(node, (*names)[k]);
      s.alpha = alpha[k];
      s.beta = beta[k];
      s.swapped = swapped[k] != 0;
      const bool binary = s.op >= ChainOp::kAdd;
      RW_EXPECTS(binary == (operand[k] >= 1) && operand[k] < static_cast<std::int64_t>(node.inputs.size()),
                 InvalidArgument, "{}: step {} ({}) has operand input {} of {}", node.where(), k, (*names)[k],
                 operand[k], node.inputs.size());
      steps_.push_back(s);
      operands_.push_back(static_cast<int>(operand[k]));
      names_.push_back((*names)[k]);
    }
    for (DType t : info.input_dtypes) expect_f32(node, t);
  }

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    const Shape& x = info.input(0).shape;
    expect_f32(node_, info.input(0).dtype);
    for (std::size_t k = 0; k < steps_.size(); ++k) {
      if (operands_[k] < 0) continue;
      const TensorDesc& c = info.input(static_cast<std::size_t>(operands_[k]));
      expect_f32(node_, c.dtype, "step operand");
      RW_EXPECTS(broadcast_fits(c.shape, x, steps_[k].inner, steps_[k].count), InvalidArgument,
                 "{}: step {} ({}) operand {} does not broadcast to input {} without changing its shape",
                 node_.where(), k, names_[k], shape_str(c.shape), shape_str(x));
    }
    return {{DType::kF32, x}};
  }

  void launch(const LaunchArgs& a) override {
    const long long n = shape_numel(a.outputs[0].shape);
    const auto* x = static_cast<const float*>(a.inputs[0].data);
    auto* y = static_cast<float*>(a.outputs[0].data);
    // One launch per kMaxChainSteps steps (the pass's chains are far shorter); later ones in place.
    for (std::size_t first = 0; first < steps_.size(); first += kernels::kMaxChainSteps) {
      kernels::ChainParams p;
      p.steps = static_cast<int>(std::min<std::size_t>(kernels::kMaxChainSteps, steps_.size() - first));
      for (int k = 0; k < p.steps; ++k) {
        p.step[k] = steps_[first + k];
        const int in = operands_[first + k];
        if (in >= 0) p.step[k].c = static_cast<const float*>(a.inputs[static_cast<std::size_t>(in)].data);
      }
      kernels::launch_elementwise_chain(p, first == 0 ? x : y, y, n, a.stream);
    }
  }

 private:
  const Node& node_;
  std::vector<kernels::ChainStep> steps_;  // inner/count set by plan(), the constants by launch()
  std::vector<int> operands_;
  std::vector<std::string> names_;
};

}  // namespace

RW_REGISTER_CUDA_KERNEL(ops::kElementwiseChain, ElementwiseChainKernel);

}  // namespace redwood::cuda
