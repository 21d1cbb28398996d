// rw.ElementwiseChain: several fp32 elementwise steps applied in one pass over memory (made by
// core/passes/fuse_elementwise.cpp, which documents the attributes).
//
// Each parallel chunk is walked in blocks of kTile elements: the first step reads the input and
// writes the block of the output, the others update that block in place while it is in L1. Every
// element goes through the same float operations, in the same order, as through the separate
// reference kernels (elementwise_unary.cpp, elementwise_binary.cpp), so the results are identical.

#include "backends/cpu/reference/ew_loop.hpp"
#include "backends/cpu/reference/kernel_util.hpp"
#include "core/ops/names.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <variant>

namespace redwood::cpu {
namespace {

constexpr std::int64_t kGrain = std::int64_t{1} << 15;
constexpr std::int64_t kTile = 1024;

enum class Op { kRelu, kSigmoid, kTanh, kSqrt, kHardSigmoid, kHardSwish, kLeakyRelu, kClip,
                kAdd, kSub, kMul, kDiv, kPow };

Op parse_op(const Node& node, const std::string& name) {
  static const std::map<std::string, Op> ops{
      {"Relu", Op::kRelu},       {"Sigmoid", Op::kSigmoid},         {"Tanh", Op::kTanh},
      {"Sqrt", Op::kSqrt},       {"HardSigmoid", Op::kHardSigmoid}, {"HardSwish", Op::kHardSwish},
      {"LeakyRelu", Op::kLeakyRelu}, {"Clip", Op::kClip},           {"Add", Op::kAdd},
      {"Sub", Op::kSub},         {"Mul", Op::kMul},                 {"Div", Op::kDiv},
      {"Pow", Op::kPow}};
  auto it = ops.find(name);
  RW_EXPECTS(it != ops.end(), InvalidArgument, "{}: unknown elementwise step '{}'", node.where(), name);
  return it->second;
}

// The scalar functions, written as the separate reference kernels write them.
float sigmoid(float x) {
  if (x >= 0.0f) return 1.0f / (1.0f + std::exp(-x));
  const float e = std::exp(x);
  return e / (1.0f + e);
}

template <typename F>
void each(float* __restrict y, const float* __restrict x, std::int64_t n, F f) {
  detail::blocked_loop(n, [&](std::int64_t i) { y[i] = f(x[i]); });
}

template <typename F>
void each_in_place(float* y, std::int64_t n, F f) {
  detail::blocked_loop(n, [&](std::int64_t i) { y[i] = f(y[i]); });
}

struct Step {
  Op op;
  float alpha = 0, beta = 0;
  int operand = -1;  // input index of a binary step's constant
  bool swapped = false;
  // Per run: the constant, and how it maps an element index i to its value:
  // value = c[(i / inner) % count].
  const float* c = nullptr;
  std::int64_t inner = 1, count = 1;
};

// y = f(x) for n elements starting at element `first` (for the constant's index); x may be y.
template <typename Body>
void apply_binary(const Step& s, std::int64_t first, std::int64_t n, float* y, const float* x, Body body) {
  auto run = [&](std::int64_t begin, std::int64_t len, float c) {
    if (x == y) {
      each_in_place(y + begin, len, [&](float v) { return s.swapped ? body(c, v) : body(v, c); });
    } else {
      each(y + begin, x + begin, len, [&](float v) { return s.swapped ? body(c, v) : body(v, c); });
    }
  };
  if (s.count == 1) {
    run(0, n, s.c[0]);
    return;
  }
  // Runs of elements sharing one constant value (inner of them per value).
  for (std::int64_t i = 0; i < n;) {
    const std::int64_t g = first + i;
    const std::int64_t len = std::min(n - i, s.inner - g % s.inner);
    run(i, len, s.c[(g / s.inner) % s.count]);
    i += len;
  }
}

void apply(const Step& s, std::int64_t first, std::int64_t n, float* y, const float* x) {
  auto unary = [&](auto f) {
    if (x == y) {
      each_in_place(y, n, f);
    } else {
      each(y, x, n, f);
    }
  };
  const float a = s.alpha, b = s.beta;
  switch (s.op) {
    case Op::kRelu: return unary([](float v) { return v < 0.0f ? 0.0f : v; });
    case Op::kSigmoid: return unary(sigmoid);
    case Op::kTanh: return unary([](float v) { return std::tanh(v); });
    case Op::kSqrt: return unary([](float v) { return std::sqrt(v); });
    case Op::kHardSigmoid: return unary([a, b](float v) { return std::clamp(a * v + b, 0.0f, 1.0f); });
    case Op::kHardSwish:
      return unary([](float v) { return v * std::clamp(v / 6.0f + 0.5f, 0.0f, 1.0f); });
    case Op::kLeakyRelu: return unary([a](float v) { return v >= 0.0f ? v : a * v; });
    case Op::kClip:
      return unary([a, b](float v) {
        if (v < a) v = a;
        if (v > b) v = b;
        return v;
      });
    case Op::kAdd: return apply_binary(s, first, n, y, x, [](float p, float q) { return p + q; });
    case Op::kSub: return apply_binary(s, first, n, y, x, [](float p, float q) { return p - q; });
    case Op::kMul: return apply_binary(s, first, n, y, x, [](float p, float q) { return p * q; });
    case Op::kDiv: return apply_binary(s, first, n, y, x, [](float p, float q) { return p / q; });
    case Op::kPow:
      return apply_binary(s, first, n, y, x, [](float p, float q) { return std::pow(p, q); });
  }
}

// The step list (a strings attribute; Node has no typed getter for those).
std::vector<std::string> step_names(const Node& node) {
  auto it = node.attributes.find(ops::attr::kSteps);
  const auto* v = it == node.attributes.end() ? nullptr : std::get_if<std::vector<std::string>>(&it->second);
  RW_EXPECTS(v != nullptr, InvalidArgument, "{}: attribute rw.steps (strings) is missing or not strings",
             node.where());
  return *v;
}

class ElementwiseChainKernel final : public Kernel {
 public:
  ElementwiseChainKernel(const Node& node, const KernelInfo& info) {
    const auto ops = step_names(node);
    const auto alpha = node.attr_floats(ops::attr::kStepAlpha);
    const auto beta = node.attr_floats(ops::attr::kStepBeta);
    const auto operand = node.attr_ints(ops::attr::kStepOperand);
    const auto swapped = node.attr_ints(ops::attr::kStepSwapped);
    RW_EXPECTS(!ops.empty() && alpha.size() == ops.size() && beta.size() == ops.size() &&
                   operand.size() == ops.size() && swapped.size() == ops.size(),
               InvalidArgument,
               "{}: rw.steps, rw.step_alpha, rw.step_beta, rw.step_operand and rw.step_swapped "
               "must list the same number (>0) of steps",
               node.where());
    for (std::size_t k = 0; k < ops.size(); ++k) {
      Step s{parse_op(node, ops[k]), alpha[k], beta[k], static_cast<int>(operand[k]), swapped[k] != 0};
      const bool binary = s.op >= Op::kAdd;
      RW_EXPECTS(binary == (s.operand >= 1) && s.operand < static_cast<int>(node.inputs.size()),
                 InvalidArgument, "{}: step {} ({}) has operand input {} of {}", node.where(), k,
                 ops[k], s.operand, node.inputs.size());
      steps_.push_back(s);
    }
    for (std::size_t i = 0; i < info.input_dtypes.size(); ++i) {
      expect_dtype(node, info.input_dtypes[i], {DType::kF32}, i == 0 ? "input" : "step operand");
    }
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor x = ctx.input(0).contiguous();
    RW_EXPECTS(x.dtype() == DType::kF32, InvalidArgument, "{}: input must be float32, got {}",
               node.where(), x.description());
    // The constants, and where each maps an element to (checked against this run's shape).
    // Members reused from run to run (a kernel runs one batch at a time), so that a run
    // allocates nothing here.
    std::vector<Step>& steps = run_steps_;
    std::vector<Tensor>& constants = run_constants_;
    steps.assign(steps_.begin(), steps_.end());
    constants.assign(ctx.inputs.size(), Tensor());
    for (std::size_t k = 0; k < steps.size(); ++k) {
      Step& s = steps[k];
      if (s.operand < 0) continue;
      Tensor& c = constants[static_cast<std::size_t>(s.operand)];
      c = ctx.input(static_cast<std::size_t>(s.operand)).contiguous();
      RW_EXPECTS(c.dtype() == DType::kF32 && fits(c.shape(), x.shape(), s), InvalidArgument,
                 "{}: step {} ({}) operand {} does not broadcast to input {} without changing its "
                 "shape (or is not float32)",
                 node.where(), k, op_name(node, k), c.description(), x.description());
      s.c = c.data<float>();
    }
    Tensor y = ctx.allocate_output(0, DType::kF32, x.shape());
    const float* in = x.data<float>();
    float* out = y.data<float>();
    parallel_for(x.numel(), kGrain, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t t = begin; t < end; t += kTile) {
        const std::int64_t n = std::min(kTile, end - t);
        apply(steps[0], t, n, out + t, in + t);
        for (std::size_t k = 1; k < steps.size(); ++k) apply(steps[k], t, n, out + t, out + t);
      }
    });
    ctx.outputs[0] = std::move(y);
    constants.clear();  // the run's inputs are not held past it
  }

 private:
  static std::string op_name(const Node& node, std::size_t k) { return step_names(node)[k]; }

  // A constant of shape c maps to element i as c[(i / inner) % count] when it broadcasts to x
  // without changing x's shape and its non-1 axes are consecutive.
  static bool fits(const Shape& c, const Shape& x, Step& s) {
    std::int64_t count = 1;
    for (auto d : c) count *= d;
    s.count = count;
    s.inner = 1;
    if (count == 1) return c.size() <= x.size();
    if (c.size() > x.size()) return false;
    const std::size_t offset = x.size() - c.size();
    std::size_t last = 0, first = c.size();
    for (std::size_t k = 0; k < c.size(); ++k) {
      if (c[k] == 1) continue;
      if (c[k] != x[offset + k]) return false;
      first = std::min(first, k);
      last = k;
    }
    for (std::size_t k = first; k <= last; ++k) {
      if (c[k] == 1 && x[offset + k] != 1) return false;  // non-1 axes not consecutive
    }
    for (std::size_t k = offset + last + 1; k < x.size(); ++k) s.inner *= x[k];
    return true;
  }

  std::vector<Step> steps_;
  std::vector<Step> run_steps_;       // steps_ with this run's constants
  std::vector<Tensor> run_constants_;
};

}  // namespace

RW_REGISTER_KERNEL(ops::kElementwiseChain, Device::kCpu, make_factory<ElementwiseChainKernel>());

}  // namespace redwood::cpu
