#include "core/executor.hpp"

#include "core/error.hpp"
#include "core/passes/pass_manager.hpp"

#include <chrono>
#include <set>

namespace redwood {

Executor::Executor(std::shared_ptr<const Graph> graph, ExecutorOptions options)
    : graph_(std::move(graph)), options_(options) {
  if (options_.optimize) {
    auto optimized = std::make_shared<Graph>(*graph_);
    pass_records_ = passes::optimize(*optimized);
    graph_ = std::move(optimized);
  }
  const Graph& g = *graph_;
  auto slot_of = [&](const std::string& name) {
    auto [it, inserted] = value_ids_.emplace(name, static_cast<int>(value_ids_.size()));
    return it->second;
  };
  for (const auto& in : g.inputs) graph_input_slots_.push_back(slot_of(in.name));
  for (const auto& [name, t] : g.initializers) slot_of(name);
  for (const auto& node : g.nodes) {
    for (const auto& in : node.inputs) {
      if (!in.empty()) slot_of(in);
    }
    for (const auto& out : node.outputs) {
      if (!out.empty()) slot_of(out);
    }
  }
  for (const auto& out : g.outputs) {
    RW_EXPECTS(value_ids_.count(out.name), InvalidArgument,
               "{}: graph output '{}' is produced by no node", g.source, out.name);
    graph_output_slots_.push_back(value_ids_.at(out.name));
  }
  constants_.resize(value_ids_.size());
  for (const auto& [name, t] : g.initializers) constants_[value_ids_.at(name)] = t;

  // Kernels, created at load so that unsupported nodes are reported before any run.
  std::vector<std::string> problems;
  for (const auto& node : g.nodes) {
    std::vector<const KernelEntry*> candidates;
    if (node.domain.empty() || node.domain == "ai.onnx") {
      for (const KernelEntry* e : OpRegistry::instance().candidates(node.op_type, options_.device)) {
        if (!options_.reference_only || e->provider == kReferenceProvider) candidates.push_back(e);
      }
    }
    providers_.emplace_back();
    if (candidates.empty()) {
      problems.push_back(fmt::format("{}: op {}{} has no {} kernel", node.where(),
                                     node.domain.empty() ? "" : node.domain + ".", node.op_type,
                                     device_name(options_.device)));
      kernels_.emplace_back();
      continue;
    }
    KernelInfo info;
    info.graph = &g;
    info.opset = g.opset;
    for (const auto& in : node.inputs) {
      const ValueInfo* vi = in.empty() ? nullptr : g.find_value(in);
      const Tensor* c = in.empty() ? nullptr : g.find_initializer(in);
      info.input_dtypes.push_back(c ? c->dtype() : vi ? vi->dtype : DType::kUndefined);
      info.constant_inputs.push_back(c);
    }
    // Providers from the highest priority down; Unsupported passes the node to the next one,
    // and the last one's reason is what the user sees.
    std::unique_ptr<Kernel> kernel;
    std::string failure;
    for (std::size_t c = 0; c < candidates.size() && !kernel; ++c) {
      try {
        kernel = candidates[c]->factory(node, info);
        providers_.back() = candidates[c]->provider;
      } catch (const Unsupported& e) {
        failure = e.what();
      } catch (const Error& e) {
        failure = e.what();
        break;
      }
    }
    if (!kernel) {
      if (failure.find(node.where()) == std::string::npos) failure = node.where() + ": " + failure;
      problems.push_back(failure);
    }
    kernels_.push_back(std::move(kernel));
  }
  if (!problems.empty()) {
    std::string msg = fmt::format("{}: {} node(s) cannot run on {}:", g.source.empty() ? g.name : g.source,
                                  problems.size(), device_name(options_.device));
    for (const auto& p : problems) msg += "\n  " + p;
    throw Unsupported(msg);
  }

  // Slots per node, and when each intermediate can be released (after its last consumer).
  std::vector<int> last_use(value_ids_.size(), -1);
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    std::vector<int> ins, outs;
    for (const auto& in : g.nodes[i].inputs) ins.push_back(in.empty() ? -1 : value_ids_.at(in));
    for (const auto& out : g.nodes[i].outputs) outs.push_back(out.empty() ? -1 : value_ids_.at(out));
    for (int s : ins) {
      if (s >= 0) last_use[s] = static_cast<int>(i);
    }
    node_inputs_.push_back(std::move(ins));
    node_outputs_.push_back(std::move(outs));
  }
  std::set<int> keep(graph_output_slots_.begin(), graph_output_slots_.end());
  release_after_.resize(g.nodes.size());
  for (std::size_t s = 0; s < last_use.size(); ++s) {
    if (last_use[s] >= 0 && !keep.count(static_cast<int>(s)) && !constants_[s].defined()) {
      release_after_[last_use[s]].push_back(static_cast<int>(s));
    }
  }
}

Executor::~Executor() = default;

void Executor::check_inputs(const std::map<std::string, Tensor>& inputs) const {
  const Graph& g = *graph_;
  const std::string model = g.source.empty() ? g.name : g.source;
  std::set<std::string> declared;
  for (const auto& vi : g.inputs) declared.insert(vi.name);
  for (const auto& [name, t] : inputs) {
    if (declared.count(name)) continue;
    std::string list;
    for (const auto& vi : g.inputs) list += (list.empty() ? "" : ", ") + vi.name;
    throw InvalidArgument(fmt::format("{}: the model has no input named '{}' (its inputs: {})",
                                      model, name, list));
  }
  std::map<std::string, std::int64_t> symbols;  // symbolic dimension -> bound extent
  for (const auto& vi : g.inputs) {
    auto it = inputs.find(vi.name);
    RW_EXPECTS(it != inputs.end() && it->second.defined(), InvalidArgument,
               "{}: input '{}' ({}) is not given", model, vi.name, vi.description());
    const Tensor& t = it->second;
    RW_EXPECTS(t.device() == options_.device, InvalidArgument, "{}: input '{}' is on {}, the executor runs on {}",
               model, vi.name, device_name(t.device()), device_name(options_.device));
    RW_EXPECTS(vi.dtype == DType::kUndefined || t.dtype() == vi.dtype, InvalidArgument,
               "{}: input '{}' expects {} but was given {}", model, vi.name, vi.description(),
               t.description());
    if (!vi.has_shape) continue;
    RW_EXPECTS(t.rank() == static_cast<std::int64_t>(vi.dims.size()), InvalidArgument,
               "{}: input '{}' expects rank {} ({}) but was given {}", model, vi.name,
               vi.dims.size(), vi.description(), t.description());
    for (std::size_t d = 0; d < vi.dims.size(); ++d) {
      const Dim& dim = vi.dims[d];
      if (dim.known()) {
        RW_EXPECTS(t.shape()[d] == dim.value, InvalidArgument,
                   "{}: input '{}' expects {} but was given {} (dimension {} differs)", model,
                   vi.name, vi.description(), t.description(), d);
      } else if (!dim.symbol.empty()) {
        auto [sit, inserted] = symbols.emplace(dim.symbol, t.shape()[d]);
        RW_EXPECTS(inserted || sit->second == t.shape()[d], InvalidArgument,
                   "{}: dimension '{}' of input '{}' is {} but another input bound it to {}",
                   model, dim.symbol, vi.name, t.shape()[d], sit->second);
      }
    }
  }
}

std::vector<Tensor> Executor::run(const std::map<std::string, Tensor>& inputs) {
  check_inputs(inputs);
  const Graph& g = *graph_;
  std::vector<Tensor> values = constants_;
  for (std::size_t i = 0; i < g.inputs.size(); ++i) {
    values[graph_input_slots_[i]] = inputs.at(g.inputs[i].name);
  }
  if (profiling_) timings_.clear();
  std::vector<Tensor> in_buf, out_buf;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& node = g.nodes[i];
    in_buf.clear();
    for (int s : node_inputs_[i]) in_buf.push_back(s >= 0 ? values[s] : Tensor());
    out_buf.assign(node_outputs_[i].size(), Tensor());
    KernelContext ctx{in_buf, out_buf, node};
    const auto start = std::chrono::steady_clock::now();
    try {
      kernels_[i]->run(ctx);
    } catch (const Error& e) {
      std::string msg = e.what();
      if (msg.find(node.where()) == std::string::npos) msg = node.where() + ": " + msg;
      throw InvalidArgument(msg);
    }
    if (profiling_) {
      const std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
      timings_.push_back({node.name, node.op_type, providers_[i], ms.count()});
    }
    for (std::size_t o = 0; o < node_outputs_[i].size(); ++o) {
      const int s = node_outputs_[i][o];
      if (s < 0) continue;
      RW_EXPECTS(out_buf[o].defined(), Error, "{}: kernel produced no output {}", node.where(), o);
      values[s] = std::move(out_buf[o]);
    }
    for (int s : release_after_[i]) values[s] = Tensor();
  }
  std::vector<Tensor> outputs;
  for (int s : graph_output_slots_) outputs.push_back(values[s]);
  return outputs;
}

}  // namespace redwood
