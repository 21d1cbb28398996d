#include "runtime/schedule.hpp"

#include "core/error.hpp"
#include "core/kernel_select.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace redwood::runtime {
namespace {

std::string model_name(const Graph& graph) { return graph.source.empty() ? graph.name : graph.source; }

// Shape(x) with opset 15's start/end, from x's planned shape.
Tensor shape_value(const Node& node, const Shape& shape) {
  const auto rank = static_cast<std::int64_t>(shape.size());
  auto clamp = [&](std::int64_t v) { return std::clamp(v < 0 ? v + rank : v, std::int64_t{0}, rank); };
  const std::int64_t start = clamp(node.attr_int("start", 0));
  const std::int64_t end = clamp(node.attr_int("end", rank));
  std::vector<std::int64_t> dims;
  for (std::int64_t i = start; i < end; ++i) dims.push_back(shape[static_cast<std::size_t>(i)]);
  return Tensor::from_vector<std::int64_t>({static_cast<std::int64_t>(dims.size())}, dims);
}

// Evaluates a node whose inputs are all known on the host with the reference kernel.
std::vector<Tensor> evaluate_on_host(const Graph& graph, const Node& node, const std::vector<Tensor>& inputs) {
  // Its inputs are known at plan time: the reference kernel computes it on the host.
  std::unique_ptr<Kernel> kernel =
      select_kernel(node, constant_kernel_info(graph, inputs), Device::kCpu, reference_provider_only).kernel;
  std::vector<Tensor> outputs(node.outputs.size());
  KernelContext ctx{inputs, outputs, node};
  kernel->run(ctx);
  return outputs;
}

// Concat by writing into offsets: where nothing precedes the axis but extents of 1 (batch 1 along
// channels, or axis 0), each input is one contiguous block of the output, so its producer can
// write it there and the Concat copies nothing for it (the CUDA ConcatKernel skips an input already
// in place). An input qualifies when a device step produces it, it is no graph output, it is read
// once by this Concat and is not placed in another one, it does not hold placed inputs itself, and
// its block starts on the workspace's alignment (kernels rely on aligned operands). The output
// then lives from the first such producer to the last reader of any of them.
void place_concat_inputs(const Graph& graph, Schedule& s, std::size_t alignment) {
  std::vector<bool> graph_output(s.values.size(), false), holds(s.values.size(), false);
  for (int id : s.graph_outputs) graph_output[static_cast<std::size_t>(id)] = true;
  for (const Schedule::Step& step : s.steps) {
    const Node& node = graph.nodes[step.node];
    if (node.op_type != "Concat" || !node.domain.empty() || step.outputs.empty() || step.outputs[0] < 0) continue;
    const int out_id = step.outputs[0];
    Schedule::Value& out = s.values[static_cast<std::size_t>(out_id)];
    const auto rank = static_cast<std::int64_t>(out.shape.size());
    std::int64_t axis = node.attr_int("axis", 0);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank || out.alias_of >= 0) continue;
    std::int64_t outer = 1;
    for (std::int64_t d = 0; d < axis; ++d) outer *= out.shape[static_cast<std::size_t>(d)];
    if (outer != 1) continue;
    std::size_t prefix = 0;
    for (int id : step.inputs) {
      if (id < 0) continue;
      Schedule::Value& v = s.values[static_cast<std::size_t>(id)];
      const bool once = std::count(step.inputs.begin(), step.inputs.end(), id) == 1;
      if (v.kind == Schedule::Kind::kDevice && !graph_output[static_cast<std::size_t>(id)] && v.alias_of < 0 &&
          !holds[static_cast<std::size_t>(id)] && once && id != out_id && prefix % alignment == 0) {
        v.alias_of = out_id;
        v.alias_offset = prefix;
        holds[static_cast<std::size_t>(out_id)] = true;
        out.first_step = std::min(out.first_step, v.first_step);
        out.last_step = std::max(out.last_step, v.last_step);
      }
      prefix += v.bytes();
    }
  }
}

// Symbolic dimensions bound so far while checking one set of inputs: a few, kept in place, so
// that checking a batch's inputs (every batch) allocates nothing unless it throws.
class SymbolBindings {
 public:
  /// The extent `symbol` is bound to, binding it to `extent` if it is new.
  std::int64_t bind(const std::string& symbol, std::int64_t extent) {
    for (std::size_t i = 0; i < count_; ++i) {
      if (*at(i).symbol == symbol) return at(i).extent;
    }
    if (count_ < in_place_.size()) {
      in_place_[count_] = {&symbol, extent};
    } else {
      beyond_.push_back({&symbol, extent});
    }
    ++count_;
    return extent;
  }

 private:
  struct Binding {
    const std::string* symbol = nullptr;  // the graph's own string
    std::int64_t extent = 0;
  };
  Binding& at(std::size_t i) { return i < in_place_.size() ? in_place_[i] : beyond_[i - in_place_.size()]; }
  std::array<Binding, 16> in_place_{};
  std::vector<Binding> beyond_;
  std::size_t count_ = 0;
};

// One input's dtype and shape against its declaration; `dtype` kUndefined skips the dtype check.
// `given()` describes what was given, for the messages (made only when one is thrown).
template <typename Given>
void check_input(const Graph& graph, const ValueInfo& vi, DType dtype, const Shape& shape, const Given& given,
                 SymbolBindings& symbols) {
  RW_EXPECTS(dtype == DType::kUndefined || vi.dtype == DType::kUndefined || dtype == vi.dtype, InvalidArgument,
             "{}: input '{}' expects {} but was given {}", model_name(graph), vi.name, vi.description(), given());
  if (!vi.has_shape) return;
  RW_EXPECTS(shape.size() == vi.dims.size(), InvalidArgument, "{}: input '{}' expects rank {} ({}) but was given {}",
             model_name(graph), vi.name, vi.dims.size(), vi.description(), given());
  for (std::size_t d = 0; d < vi.dims.size(); ++d) {
    const Dim& dim = vi.dims[d];
    if (dim.known()) {
      RW_EXPECTS(shape[d] == dim.value, InvalidArgument,
                 "{}: input '{}' expects {} but was given {} (dimension {} differs)", model_name(graph), vi.name,
                 vi.description(), given(), d);
    } else if (!dim.symbol.empty()) {
      const std::int64_t bound = symbols.bind(dim.symbol, shape[d]);
      RW_EXPECTS(bound == shape[d], InvalidArgument,
                 "{}: dimension '{}' of input '{}' is {} but another input bound it to {}", model_name(graph),
                 dim.symbol, vi.name, shape[d], bound);
    }
  }
}

// One given input tensor against graph input `vi`.
void check_input_tensor(const Graph& graph, const ValueInfo& vi, const Tensor& t, Device device, SymbolBindings& symbols) {
  RW_EXPECTS(t.defined(), InvalidArgument, "{}: input '{}' ({}) is not given", model_name(graph), vi.name,
             vi.description());
  RW_EXPECTS(t.device() == device, InvalidArgument, "{}: input '{}' is on {}, the executor runs on {}",
             model_name(graph), vi.name, device_name(t.device()), device_name(device));
  check_input(graph, vi, t.dtype(), t.shape(), [&] { return t.description(); }, symbols);
}

}  // namespace

Dataflow make_dataflow(const Graph& graph) {
  Dataflow f;
  auto add = [&](const std::string& name, const Tensor* initializer) {
    auto [it, inserted] = f.ids.emplace(name, static_cast<int>(f.names.size()));
    if (inserted) {
      f.names.push_back(name);
      f.initializers.push_back(initializer);
    }
    return it->second;
  };
  for (const ValueInfo& in : graph.inputs) f.graph_inputs.push_back(add(in.name, nullptr));
  for (const auto& [name, t] : graph.initializers) add(name, &t);
  for (const Node& node : graph.nodes) {
    std::vector<int> ins, outs;
    for (const std::string& name : node.inputs) {
      if (name.empty()) {
        ins.push_back(-1);
        continue;
      }
      const auto it = f.ids.find(name);
      RW_EXPECTS(it != f.ids.end(), InvalidArgument,
                 "{}: input '{}' is produced by nothing before it (no graph input, initializer or earlier node)",
                 node.where(), name);
      ins.push_back(it->second);
    }
    for (const std::string& name : node.outputs) outs.push_back(name.empty() ? -1 : add(name, nullptr));
    f.node_inputs.push_back(std::move(ins));
    f.node_outputs.push_back(std::move(outs));
  }
  for (const ValueInfo& out : graph.outputs) {
    const auto it = f.ids.find(out.name);
    RW_EXPECTS(it != f.ids.end(), InvalidArgument, "{}: graph output '{}' is produced by no node", model_name(graph),
               out.name);
    f.graph_outputs.push_back(it->second);
  }
  f.last_use.assign(f.size(), -1);
  for (std::size_t n = 0; n < f.node_inputs.size(); ++n) {
    for (int id : f.node_inputs[n]) {
      if (id >= 0) f.last_use[static_cast<std::size_t>(id)] = static_cast<int>(n);
    }
  }
  f.is_graph_output.assign(f.size(), false);
  for (int id : f.graph_outputs) f.is_graph_output[static_cast<std::size_t>(id)] = true;
  return f;
}

std::vector<bool> shape_determined_nodes(const Graph& graph, const Dataflow& flow) {
  std::vector<bool> folded_nodes(graph.nodes.size(), false);
  // A value is shape-determined when a constant or an output of such a node holds it.
  std::vector<bool> determined(flow.size(), false);
  for (std::size_t id = 0; id < flow.size(); ++id) determined[id] = flow.initializers[id] != nullptr;
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& node = graph.nodes[i];
    bool folded = node.body.empty() && !node.outputs.empty();
    bool reads_shape = false;  // at least one input comes from the shape side (else: a constant)
    if (folded && node.op_type == "Shape" && node.domain.empty()) {
      reads_shape = true;  // depends on its input's shape only
    } else if (folded) {
      for (int id : flow.node_inputs[i]) {
        if (id < 0) continue;
        if (!determined[static_cast<std::size_t>(id)]) folded = false;
        else if (flow.initializers[static_cast<std::size_t>(id)] == nullptr) reads_shape = true;
      }
    }
    for (int id : flow.node_outputs[i]) {
      if (id >= 0 && flow.is_graph_output[static_cast<std::size_t>(id)]) folded = false;
    }
    if (!folded || !reads_shape) continue;
    folded_nodes[i] = true;
    for (int id : flow.node_outputs[i]) {
      if (id >= 0) determined[static_cast<std::size_t>(id)] = true;
    }
  }
  return folded_nodes;
}

void check_inputs(const Graph& graph, const std::map<std::string, Tensor>& inputs, Device device) {
  for (const auto& [name, t] : inputs) {
    const bool declared = std::any_of(graph.inputs.begin(), graph.inputs.end(), [&](const ValueInfo& vi) { return vi.name == name; });
    if (declared) continue;
    std::string list;
    for (const auto& vi : graph.inputs) list += (list.empty() ? "" : ", ") + vi.name;
    throw InvalidArgument(fmt::format("{}: the model has no input named '{}' (its inputs: {})", model_name(graph), name, list));
  }
  SymbolBindings symbols;
  for (const auto& vi : graph.inputs) {
    auto it = inputs.find(vi.name);
    RW_EXPECTS(it != inputs.end(), InvalidArgument, "{}: input '{}' ({}) is not given", model_name(graph), vi.name,
               vi.description());
    check_input_tensor(graph, vi, it->second, device, symbols);
  }
}

void check_inputs(const Graph& graph, std::span<const Tensor> inputs, Device device) {
  RW_EXPECTS(inputs.size() == graph.inputs.size(), InvalidArgument, "{}: {} inputs given for {} graph inputs",
             model_name(graph), inputs.size(), graph.inputs.size());
  SymbolBindings symbols;
  for (std::size_t i = 0; i < inputs.size(); ++i) check_input_tensor(graph, graph.inputs[i], inputs[i], device, symbols);
}

void check_input_shapes(const Graph& graph, const std::vector<Shape>& shapes) {
  RW_EXPECTS(shapes.size() == graph.inputs.size(), InvalidArgument, "{}: {} input shapes for {} graph inputs",
             model_name(graph), shapes.size(), graph.inputs.size());
  SymbolBindings symbols;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    check_input(graph, graph.inputs[i], DType::kUndefined, shapes[i], [&] { return "shape " + shape_str(shapes[i]); },
                symbols);
  }
}

Schedule build_schedule(const Graph& graph, const std::vector<Shape>& input_shapes, const StepPlanner& plan_step,
                        std::size_t alignment) {
  check_input_shapes(graph, input_shapes);
  const Dataflow flow = make_dataflow(graph);
  Schedule s;
  s.values.resize(flow.size());
  for (std::size_t id = 0; id < flow.size(); ++id) {
    Schedule::Value& v = s.values[id];
    v.name = flow.names[id];
    if (const Tensor* init = flow.initializers[id]) {
      v.kind = Schedule::Kind::kHost;
      v.dtype = init->dtype();
      v.shape = init->shape();
      v.host = *init;
      v.initializer = true;
    }
  }
  for (std::size_t i = 0; i < graph.inputs.size(); ++i) {
    Schedule::Value& v = s.values[static_cast<std::size_t>(flow.graph_inputs[i])];
    v.kind = Schedule::Kind::kGraphInput;
    v.dtype = graph.inputs[i].dtype;
    v.shape = input_shapes[i];
    v.host = Tensor();
    v.initializer = false;
  }
  s.graph_inputs = flow.graph_inputs;

  for (std::size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    const std::vector<int>& in = flow.node_inputs[n];
    bool all_host = true;
    for (int id : in) {
      if (id >= 0 && s.values[static_cast<std::size_t>(id)].kind != Schedule::Kind::kHost) all_host = false;
    }
    const bool shape_of = node.op_type == "Shape" && node.domain.empty() && !in.empty() && in[0] >= 0;
    if (shape_of || all_host) {
      // Shape arithmetic and constants: computed once here, never on the device.
      std::vector<Tensor> outputs;
      if (shape_of) {
        outputs.push_back(shape_value(node, s.values[static_cast<std::size_t>(in[0])].shape));
      } else {
        std::vector<Tensor> inputs;
        for (int id : in) inputs.push_back(id >= 0 ? s.values[static_cast<std::size_t>(id)].host : Tensor());
        outputs = evaluate_on_host(graph, node, inputs);
      }
      for (std::size_t o = 0; o < node.outputs.size(); ++o) {
        const int id = flow.node_outputs[n][o];
        if (id < 0) continue;
        Schedule::Value& v = s.values[static_cast<std::size_t>(id)];
        v.kind = Schedule::Kind::kHost;
        v.dtype = outputs[o].dtype();
        v.shape = outputs[o].shape();
        v.host = outputs[o].contiguous();
      }
      ++s.host_nodes;
      continue;
    }
    // A device step, as the device's planner chooses and plans it.
    std::vector<TensorDesc> descs(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
      if (in[i] < 0) continue;
      const Schedule::Value& v = s.values[static_cast<std::size_t>(in[i])];
      descs[i] = {v.dtype, v.shape, v.kind == Schedule::Kind::kHost ? &v.host : nullptr};
    }
    StepPlan planned = plan_step(graph, node, descs);
    RW_EXPECTS(planned.kernel != nullptr && planned.outputs.size() == node.outputs.size(), InvalidArgument,
               "{}: the {} kernel planned {} outputs of {}", node.where(), planned.provider, planned.outputs.size(),
               node.outputs.size());
    Schedule::Step step;
    step.node = n;
    step.provider = std::move(planned.provider);
    step.kernel = std::move(planned.kernel);
    const auto index = static_cast<std::int64_t>(s.steps.size());
    for (int id : in) {
      if (id < 0) continue;
      Schedule::Value& v = s.values[static_cast<std::size_t>(id)];
      if (v.kind == Schedule::Kind::kHost) v.uploaded = true;
      v.last_step = std::max(v.last_step, index);
    }
    step.inputs = in;
    for (std::size_t o = 0; o < planned.outputs.size(); ++o) {
      const int id = flow.node_outputs[n][o];
      step.outputs.push_back(id);
      if (id < 0) continue;
      Schedule::Value& v = s.values[static_cast<std::size_t>(id)];
      v.kind = Schedule::Kind::kDevice;
      v.dtype = planned.outputs[o].dtype;
      v.shape = planned.outputs[o].shape;
      v.first_step = v.last_step = index;
    }
    if (planned.workspace_bytes > 0) {
      Schedule::Value v;  // lives for this step only, so later steps reuse its bytes
      v.name = node.name + ":workspace";
      v.kind = Schedule::Kind::kDevice;
      v.dtype = DType::kU8;
      v.shape = {static_cast<std::int64_t>(planned.workspace_bytes)};
      v.first_step = v.last_step = index;
      step.workspace = static_cast<int>(s.values.size());
      s.values.push_back(std::move(v));
    }
    s.steps.push_back(std::move(step));
  }
  const auto end = static_cast<std::int64_t>(s.steps.size());
  for (int id : flow.graph_outputs) {
    s.values[static_cast<std::size_t>(id)].last_step = end;  // outputs live to the end
    s.graph_outputs.push_back(id);
  }
  place_concat_inputs(graph, s, alignment);
  // One workspace for graph inputs, intermediates and outputs, packed by lifetime (values placed
  // in a Concat's output take their offset from it). Values no step reads or writes (a graph
  // input nothing reads, an output of a host node) take no room beyond their own lifetime.
  std::vector<memory::TensorLifetime> lifetimes;
  std::vector<int> placed;
  for (std::size_t i = 0; i < s.values.size(); ++i) {
    const Schedule::Value& v = s.values[i];
    if (v.kind == Schedule::Kind::kHost || v.alias_of >= 0) continue;
    lifetimes.push_back({std::max<std::size_t>(v.bytes(), 4), v.first_step, std::max(v.first_step, v.last_step)});
    placed.push_back(static_cast<int>(i));
  }
  s.workspace = memory::plan_workspace(lifetimes, alignment);
  for (std::size_t i = 0; i < placed.size(); ++i) s.values[static_cast<std::size_t>(placed[i])].offset = s.workspace.offsets[i];
  for (Schedule::Value& v : s.values) {
    if (v.alias_of >= 0) v.offset = s.values[static_cast<std::size_t>(v.alias_of)].offset + v.alias_offset;
  }
  return s;
}

}  // namespace redwood::runtime
