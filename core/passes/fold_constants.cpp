// Constant folding: a node whose inputs are all initializers (Constant nodes have none) is run
// once with its reference kernel and its outputs become initializers; Shape of a value whose
// shape the graph knows completely becomes a constant too, so Shape -> Gather -> Concat chains
// fold once the shapes are known. Nodes with huge outputs (over kMaxFoldElements) stay, and are
// refused before their kernel computes anything: a crafted model whose constants expand to
// gigabytes (a Pad, an Expand) must not spend the load computing them.

#include "core/error.hpp"
#include "core/kernel_info.hpp"
#include "core/kernel_select.hpp"
#include "core/op_registry.hpp"
#include "core/passes/graph_utils.hpp"
#include "core/passes/pass_manager.hpp"

#include <fmt/format.h>

namespace redwood::passes {
namespace {

constexpr std::int64_t kMaxFoldElements = std::int64_t{1} << 22;

// Shape's output when the input's shape is fully known (start/end of opset 15 applied).
bool static_shape(const Graph& g, const Node& n, Tensor& out) {
  if (!n.has_input(0)) return false;
  std::vector<std::int64_t> dims;
  if (const Tensor* c = g.find_initializer(n.inputs[0])) {
    dims = c->shape();
  } else {
    const ValueInfo* vi = g.find_value(n.inputs[0]);
    if (vi == nullptr || !vi->has_shape) return false;
    for (const Dim& d : vi->dims) {
      if (!d.known()) return false;
      dims.push_back(d.value);
    }
  }
  const auto rank = static_cast<std::int64_t>(dims.size());
  auto clamp = [&](std::int64_t v) { return std::clamp<std::int64_t>(v < 0 ? v + rank : v, 0, rank); };
  const std::int64_t start = clamp(n.attr_int("start", 0)), end = clamp(n.attr_int("end", rank));
  std::vector<std::int64_t> part;
  for (std::int64_t i = start; i < end; ++i) part.push_back(dims[i]);
  out = Tensor::from_vector<std::int64_t>({static_cast<std::int64_t>(part.size())}, part);
  return true;
}

// Outputs come from the heap unless they are too large to fold: the kernel's allocation fails
// (an Error, which leaves the node to the run) before any work on them.
class FoldAllocator final : public OutputAllocator {
 public:
  explicit FoldAllocator(const Node& node) : node_(node) {}
  Tensor allocate(std::size_t output, DType dtype, Shape shape) override {
    if (shape_numel(shape) > kMaxFoldElements) {
      throw InvalidArgument(fmt::format("{}: output {} is {}, too large to fold", node_.name, output, shape_str(shape)));
    }
    return Tensor::empty(dtype, std::move(shape));
  }

 private:
  const Node& node_;
};

bool evaluate(const Graph& g, const Node& n, std::vector<Tensor>& outs) {
  std::vector<Tensor> ins;
  for (const auto& in : n.inputs) {
    const Tensor* c = in.empty() ? nullptr : g.find_initializer(in);
    ins.push_back(c ? *c : Tensor());
  }
  try {
    auto kernel = select_kernel(n, constant_kernel_info(g, ins), Device::kCpu, reference_provider_only).kernel;
    outs.assign(n.outputs.size(), Tensor());
    FoldAllocator allocator(n);
    KernelContext ctx{ins, outs, n, &allocator};
    kernel->run(ctx);
  } catch (const Error&) {
    return false;  // leave it to the run, which reports the problem where it happens
  }
  for (std::size_t i = 0; i < outs.size(); ++i) {
    if (!n.outputs[i].empty() && (!outs[i].defined() || outs[i].numel() > kMaxFoldElements)) return false;
  }
  return true;
}

}  // namespace

void fold_constants(Graph& g, std::vector<std::string>& log) {
  std::set<std::string> graph_inputs;
  for (const auto& vi : g.inputs) graph_inputs.insert(vi.name);
  std::vector<bool> dead(g.nodes.size(), false);
  std::size_t folded = 0;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    bool all_constant = true;
    for (const auto& in : n.inputs) {
      all_constant = all_constant && (in.empty() || (g.find_initializer(in) && !graph_inputs.count(in)));
    }
    std::vector<Tensor> outs;
    if (n.op_type == "Shape" && n.domain.empty()) {
      Tensor t;
      if (!static_shape(g, n, t)) continue;
      outs.push_back(t);
    } else if (!all_constant || !evaluate(g, n, outs)) {
      continue;
    }
    for (std::size_t o = 0; o < n.outputs.size(); ++o) {
      if (!n.outputs[o].empty()) g.initializers[n.outputs[o]] = outs[o].contiguous();
    }
    dead[i] = true;
    ++folded;
    if (n.op_type != "Constant") log.push_back(fmt::format("folded {}", n.where()));
  }
  // A graph output that became constant still needs a producer: keep those nodes (their outputs
  // are initializers too, which the executor reads as constants).
  std::set<std::string> outputs;
  for (const auto& o : g.outputs) outputs.insert(o.name);
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    if (!dead[i]) continue;
    for (const auto& o : g.nodes[i].outputs) {
      if (outputs.count(o)) {
        dead[i] = false;
        for (const auto& oo : g.nodes[i].outputs) g.initializers.erase(oo);
      }
    }
  }
  std::size_t constants = 0;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) constants += dead[i] && g.nodes[i].op_type == "Constant";
  if (constants > 0) log.push_back(fmt::format("{} Constant node(s) became initializers", constants));
  detail::erase_nodes(g, dead);
}

}  // namespace redwood::passes
