#include "backends/cuda/graph_runner.hpp"

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/device_arch.hpp"
#include "backends/cuda/device_memory.hpp"
#include "backends/cuda/kernel_select.hpp"
#include "backends/cuda/plan_cache.hpp"
#include "core/error.hpp"
#include "core/kernel_info.hpp"
#include "core/log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace redwood::cuda {
namespace {

constexpr std::size_t kAlignment = 256;

std::size_t align_up(std::size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

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
  const KernelEntry* reference = nullptr;
  for (const KernelEntry* e : OpRegistry::instance().candidates(node.op_type, Device::kCpu)) {
    if (e->provider == kReferenceProvider) reference = e;
  }
  RW_EXPECTS(reference != nullptr, Unsupported,
             "{}: its inputs are known at plan time but no reference kernel is linked to compute it on the host",
             node.where());
  std::unique_ptr<Kernel> kernel = reference->factory(node, constant_kernel_info(graph, inputs));
  std::vector<Tensor> outputs(node.outputs.size());
  KernelContext ctx{inputs, outputs, node};
  kernel->run(ctx);
  return outputs;
}

// Concat by writing into offsets: where nothing precedes the axis but extents of 1 (batch 1 along
// channels, or axis 0), each input is one contiguous block of the output, so its producer can
// write it there and the Concat copies nothing for it (ConcatKernel skips an input already in
// place). An input qualifies when a device step produces it, it is no graph output, it is read once
// by this Concat and is not placed in another one, it does not hold placed inputs itself, and its
// block starts on the workspace's alignment (kernels rely on aligned operands). The output then
// lives from the first such producer to the last reader of any of them.
void place_concat_inputs(const Graph& graph, Schedule& s) {
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
          !holds[static_cast<std::size_t>(id)] && once && id != out_id && prefix % kAlignment == 0) {
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

}  // namespace

Schedule build_schedule(const Graph& graph, const std::vector<Shape>& input_shapes, Precision precision) {
  RW_EXPECTS(input_shapes.size() == graph.inputs.size(), InvalidArgument, "{}: {} input shapes for {} graph inputs",
             graph.name, input_shapes.size(), graph.inputs.size());
  Schedule s;
  std::map<std::string, int> ids;
  auto add_value = [&](Schedule::Value v) {
    ids[v.name] = static_cast<int>(s.values.size());
    s.values.push_back(std::move(v));
    return static_cast<int>(s.values.size()) - 1;
  };
  for (std::size_t i = 0; i < graph.inputs.size(); ++i) {
    const ValueInfo& vi = graph.inputs[i];
    Schedule::Value v;
    v.name = vi.name;
    v.kind = Schedule::Kind::kGraphInput;
    v.dtype = vi.dtype;
    v.shape = input_shapes[i];
    if (vi.has_shape) {
      RW_EXPECTS(vi.dims.size() == v.shape.size(), InvalidArgument, "input '{}' is {}, given shape {}", vi.name,
                 vi.description(), shape_str(v.shape));
      for (std::size_t d = 0; d < vi.dims.size(); ++d) {
        RW_EXPECTS(!vi.dims[d].known() || vi.dims[d].value == v.shape[d], InvalidArgument,
                   "input '{}' is {}, given shape {}", vi.name, vi.description(), shape_str(v.shape));
      }
    }
    s.graph_inputs.push_back(add_value(std::move(v)));
  }
  auto lookup = [&](const std::string& name, const Node& node) -> int {
    if (name.empty()) return -1;
    if (auto it = ids.find(name); it != ids.end()) return it->second;
    const Tensor* init = graph.find_initializer(name);
    RW_EXPECTS(init != nullptr, InvalidArgument, "{}: input '{}' is produced by nothing", node.where(), name);
    Schedule::Value v;
    v.name = name;
    v.kind = Schedule::Kind::kHost;
    v.dtype = init->dtype();
    v.shape = init->shape();
    v.host = *init;
    v.initializer = true;
    return add_value(std::move(v));
  };

  for (std::size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    std::vector<int> in;
    bool all_host = true;
    for (const auto& name : node.inputs) {
      const int id = lookup(name, node);
      in.push_back(id);
      if (id >= 0 && s.values[static_cast<std::size_t>(id)].kind != Schedule::Kind::kHost) all_host = false;
    }
    if ((node.op_type == "Shape" && node.domain.empty() && !in.empty() && in[0] >= 0) || all_host) {
      // Shape arithmetic and constants: computed once here, never on the device.
      std::vector<Tensor> outputs;
      if (node.op_type == "Shape" && node.domain.empty()) {
        outputs.push_back(shape_value(node, s.values[static_cast<std::size_t>(in[0])].shape));
      } else {
        std::vector<Tensor> inputs;
        for (int id : in) inputs.push_back(id >= 0 ? s.values[static_cast<std::size_t>(id)].host : Tensor());
        outputs = evaluate_on_host(graph, node, inputs);
      }
      for (std::size_t o = 0; o < node.outputs.size(); ++o) {
        if (node.outputs[o].empty()) continue;
        Schedule::Value v;
        v.name = node.outputs[o];
        v.kind = Schedule::Kind::kHost;
        v.dtype = outputs[o].dtype();
        v.shape = outputs[o].shape();
        v.host = outputs[o].contiguous();
        add_value(std::move(v));
      }
      ++s.host_nodes;
      continue;
    }
    // A device step: the first CUDA kernel (highest priority) whose factory accepts the node.
    std::vector<TensorDesc> descs(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
      if (in[i] < 0) continue;
      const Schedule::Value& v = s.values[static_cast<std::size_t>(in[i])];
      descs[i] = {v.dtype, v.shape, v.kind == Schedule::Kind::kHost ? &v.host : nullptr};
    }
    SelectedKernel selected = select_cuda_kernel(graph, node, descs);
    Schedule::Step step;
    step.node = n;
    step.provider = std::move(selected.provider);
    step.kernel = std::move(selected.kernel);
    step.kernel->set_precision(precision);
    const PlanInfo plan_info{node, descs, precision, graph.opset};
    const std::vector<TensorDesc> outs = step.kernel->plan(plan_info);
    RW_EXPECTS(outs.size() == node.outputs.size(), InvalidArgument, "{}: the CUDA kernel planned {} outputs of {}",
               node.where(), outs.size(), node.outputs.size());
    const auto index = static_cast<std::int64_t>(s.steps.size());
    for (int id : in) {
      if (id < 0) continue;
      Schedule::Value& v = s.values[static_cast<std::size_t>(id)];
      if (v.kind == Schedule::Kind::kHost) v.uploaded = true;
      v.last_step = std::max(v.last_step, index);
    }
    step.inputs = std::move(in);
    for (std::size_t o = 0; o < outs.size(); ++o) {
      if (node.outputs[o].empty()) {
        step.outputs.push_back(-1);
        continue;
      }
      Schedule::Value v;
      v.name = node.outputs[o];
      v.kind = Schedule::Kind::kDevice;
      v.dtype = outs[o].dtype;
      v.shape = outs[o].shape;
      v.first_step = v.last_step = index;
      step.outputs.push_back(add_value(std::move(v)));
    }
    if (const std::size_t scratch = step.kernel->workspace_bytes(); scratch > 0) {
      Schedule::Value v;  // lives for this step only, so later steps reuse its bytes
      v.name = node.name + ":workspace";
      v.kind = Schedule::Kind::kDevice;
      v.dtype = DType::kU8;
      v.shape = {static_cast<std::int64_t>(scratch)};
      v.first_step = v.last_step = index;
      step.workspace = add_value(std::move(v));
    }
    s.steps.push_back(std::move(step));
  }
  const auto end = static_cast<std::int64_t>(s.steps.size());
  for (const ValueInfo& vi : graph.outputs) {
    auto it = ids.find(vi.name);
    int id = it != ids.end() ? it->second : -1;
    if (id < 0) {
      const Tensor* init = graph.find_initializer(vi.name);
      RW_EXPECTS(init != nullptr, InvalidArgument, "graph output '{}' is produced by nothing", vi.name);
      id = lookup(vi.name, graph.nodes.empty() ? Node{} : graph.nodes.front());
    }
    s.values[static_cast<std::size_t>(id)].last_step = end;  // outputs live to the end
    s.graph_outputs.push_back(id);
  }
  place_concat_inputs(graph, s);
  // One workspace for graph inputs, intermediates and outputs, packed by lifetime (values placed
  // in a Concat's output take their offset from it).
  std::vector<memory::TensorLifetime> lifetimes;
  std::vector<int> placed;
  for (std::size_t i = 0; i < s.values.size(); ++i) {
    const Schedule::Value& v = s.values[i];
    if (v.kind == Schedule::Kind::kHost || v.alias_of >= 0) continue;
    lifetimes.push_back({std::max<std::size_t>(v.bytes(), 4), v.first_step, std::max(v.first_step, v.last_step)});
    placed.push_back(static_cast<int>(i));
  }
  s.workspace = memory::plan_workspace(lifetimes, kAlignment);
  for (std::size_t i = 0; i < placed.size(); ++i) s.values[static_cast<std::size_t>(placed[i])].offset = s.workspace.offsets[i];
  for (Schedule::Value& v : s.values) {
    if (v.alias_of >= 0) v.offset = s.values[static_cast<std::size_t>(v.alias_of)].offset + v.alias_offset;
  }
  return s;
}

Plan::~Plan() {
  if (exec_ != nullptr) RW_CUDA_WARN(cudaGraphExecDestroy(exec_));
}

void* Plan::input(std::size_t i) const {
  const auto& v = schedule_.values.at(static_cast<std::size_t>(schedule_.graph_inputs.at(i)));
  return static_cast<char*>(workspace_.data()) + v.offset;
}

void* Plan::output(std::size_t i) const {
  const auto& v = schedule_.values.at(static_cast<std::size_t>(schedule_.graph_outputs.at(i)));
  RW_EXPECTS(v.kind != Schedule::Kind::kHost, InvalidArgument, "graph output '{}' is computed on the host", v.name);
  return static_cast<char*>(workspace_.data()) + v.offset;
}

std::vector<std::string> Plan::variants() const {
  std::vector<std::string> out;
  for (const auto& step : schedule_.steps) {
    if (std::string v = step.kernel->variant(); !v.empty()) out.push_back(std::move(v));
  }
  return out;
}

void Plan::launch_steps(cudaStream_t stream) {
  // A failed runtime call elsewhere leaves its error for cudaGetLastError: clear it, so that each
  // launch check reports only its own kernel's failure.
  cudaGetLastError();
  for (std::size_t i = 0; i < schedule_.steps.size(); ++i) {
    schedule_.steps[i].kernel->launch(LaunchArgs{step_inputs_[i], step_outputs_[i], stream, step_workspaces_[i]});
  }
}

std::vector<double> Plan::time_steps(cudaStream_t stream, int runs) {
  RW_EXPECTS(runs > 0, InvalidArgument, "Plan::time_steps: runs must be positive, not {}", runs);
  const std::size_t n = schedule_.steps.size();
  std::vector<Event> marks;
  marks.reserve(n + 1);
  for (std::size_t i = 0; i <= n; ++i) marks.emplace_back(true);
  std::vector<std::vector<double>> times(n);
  launch_steps(stream);  // warm-up: caches, clocks
  for (int r = 0; r < runs; ++r) {
    cudaGetLastError();
    marks[0].record(stream);
    for (std::size_t i = 0; i < n; ++i) {
      schedule_.steps[i].kernel->launch(LaunchArgs{step_inputs_[i], step_outputs_[i], stream, step_workspaces_[i]});
      marks[i + 1].record(stream);
    }
    marks[n].synchronize();
    for (std::size_t i = 0; i < n; ++i) times[i].push_back(marks[i + 1].elapsed_ms_since(marks[i]));
  }
  std::vector<double> medians(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::nth_element(times[i].begin(), times[i].begin() + runs / 2, times[i].end());
    medians[i] = times[i][static_cast<std::size_t>(runs / 2)];
  }
  return medians;
}

void Plan::enqueue(cudaStream_t stream) {
  if (exec_ != nullptr) {
    RW_CUDA_CHECK(cudaGraphLaunch(exec_, stream));
  } else {
    launch_steps(stream);
  }
}

std::optional<DType> nhwc_storage(const RunnerOptions& options) {
  if (!options.nhwc) return std::nullopt;
  switch (options.precision) {
    case Precision::kFp16: return DType::kF16;
    case Precision::kBf16: return DType::kBF16;
    // fp32 storage: tf32 products at tf32; at fp32 rw.ConvNhwc's 3xTF32 products (fp32-accurate).
    case Precision::kTf32:
    case Precision::kFp32: return DType::kF32;
  }
  return std::nullopt;
}

bool space_to_depth_stem(const RunnerOptions& options) {
  if (!options.space_to_depth_stem || !nhwc_storage(options).has_value()) return false;
  const char* env = std::getenv("REDWOOD_CUDA_S2D_STEM");
  return env == nullptr || std::string_view(env) != "0";
}

bool fuse_conv_shortcuts(const RunnerOptions& options) {
  const char* env = std::getenv("REDWOOD_CUDA_FUSE_SHORTCUT");
  const std::string_view v = env != nullptr ? env : "";
  if (v == "1" || v == "0") return v == "1";
  return options.fuse_conv_shortcuts;
}

GraphRunner::GraphRunner(std::shared_ptr<const Graph> graph, RunnerOptions options)
    : options_(options), plans_(options.max_plans) {
  RW_EXPECTS(graph != nullptr, InvalidArgument, "GraphRunner: no graph");
  // A GPU this build carries no code for would fail at the first launch with CUDA's terse "no
  // kernel image"; say which GPU and which architectures were built instead (device_arch.hpp).
  int device = 0;
  RW_CUDA_CHECK(cudaGetDevice(&device));
  device_ = device;
  const ProbeResult probe = probe_devices();
  if (device >= 0 && static_cast<std::size_t>(device) < probe.devices.size()) {
    const std::string why = architecture_problem(probe.devices[static_cast<std::size_t>(device)]);
    RW_EXPECTS(why.empty(), Unsupported, "GraphRunner: {}", why);
  }
  // Keyed by the graph as imported, before the passes below rewrite the copy.
  const auto start = std::chrono::steady_clock::now();
  if (options_.plan_cache && options_.tune_budget_ms > 0) plan_cache_ = make_runner_plan_cache(*graph, options_, device_);
  const auto keyed = std::chrono::steady_clock::now();
  std::shared_ptr<Graph> optimized =
      options_.optimize && plan_cache_ ? plan_cache_->load_optimized(pass_records_) : nullptr;
  const bool from_cache = optimized != nullptr;
  if (optimized) {
    // The passes' result for this model, key and build, as an earlier run kept it.
    optimized->source = graph->source;
    graph_ = std::move(optimized);
  } else if (options_.optimize) {
    auto copy = std::make_shared<Graph>(*graph);
    // Without form_regions (its fused regions are for the CPU providers), with elementwise chains,
    // and at fp16/bf16/tf32 with NHWC activations between convolutions (choose_gpu_layout).
    // At tf32 the NHWC groups hold tf32-rounded operands (exact for wgmma's truncating tf32).
    const std::optional<DType> storage = nhwc_storage(options_);
    // And the stem by space-to-depth (space_to_depth_stem).
    pass_records_ = passes::optimize(
        *copy, passes::gpu_pipeline(storage, storage.has_value() && options_.precision == Precision::kTf32,
                                    space_to_depth_stem(options_), fuse_conv_shortcuts(options_)));
    if (plan_cache_) plan_cache_->save_optimized(*copy, pass_records_);
    graph_ = std::move(copy);
  } else {
    graph_ = std::move(graph);
  }
  using Ms = std::chrono::duration<double, std::milli>;
  log().debug("GraphRunner {}: plan cache key in {:.1f} ms, optimized in {:.1f} ms{}", graph_->name,
              Ms(keyed - start).count(), Ms(std::chrono::steady_clock::now() - keyed).count(),
              from_cache ? " (read back from the plan cache)" : "");
}

GraphRunner::~GraphRunner() {
  // Plans' graphs and buffers go before the stream they were used on.
  cudaStreamSynchronize(stream_.get());
  plans_.clear();
}

const void* GraphRunner::upload_initializer(const std::string& name, const Tensor& value) {
  auto it = weights_.find(name);
  if (it == weights_.end()) {
    if (!weights_arena_) {
      // Room for every initializer of the graph: the most the device steps can read.
      std::size_t bytes = 0;
      for (const auto& [n, t] : graph_->initializers) bytes += align_up(std::max<std::size_t>(t.nbytes(), 4));
      weights_arena_ = device_arena(graph_->name + " weights", device_, bytes);
    }
    const Tensor c = value.contiguous();
    DeviceBuffer buffer(*weights_arena_, std::max<std::size_t>(c.nbytes(), 4));
    copy_host_to_device(buffer.data(), c.raw_data(), c.nbytes(), staging_, stream_.get());
    it = weights_.emplace(name, std::move(buffer)).first;
  }
  return it->second.data();
}

std::unique_ptr<Plan> GraphRunner::make_plan(const std::vector<Shape>& input_shapes, cudaStream_t stream) {
  std::unique_ptr<Plan> plan(new Plan());
  plan->schedule_ = build_schedule(*graph_, input_shapes, options_.precision);
  Schedule& s = plan->schedule_;
  // Host-computed values that device steps read go into one per-plan buffer.
  std::size_t constant_bytes = 0;
  std::vector<std::size_t> constant_offsets(s.values.size(), 0);
  for (std::size_t i = 0; i < s.values.size(); ++i) {
    const auto& v = s.values[i];
    if (v.kind == Schedule::Kind::kHost && v.uploaded && !v.initializer) {
      constant_offsets[i] = constant_bytes;
      constant_bytes += align_up(std::max<std::size_t>(v.bytes(), 4));
    }
  }
  // The workspace and the constants: one arena, one device allocation for the plan's life.
  const std::size_t workspace_bytes = align_up(std::max<std::size_t>(s.workspace.workspace_bytes, 4));
  plan->arena_ = device_arena(graph_->name + " plan", device_, workspace_bytes + constant_bytes);
  plan->workspace_ = DeviceBuffer(*plan->arena_, workspace_bytes);
  if (constant_bytes > 0) {
    plan->constants_ = DeviceBuffer(*plan->arena_, constant_bytes);
    std::vector<char> packed(constant_bytes, 0);
    for (std::size_t i = 0; i < s.values.size(); ++i) {
      const auto& v = s.values[i];
      if (v.kind == Schedule::Kind::kHost && v.uploaded && !v.initializer) {
        std::memcpy(packed.data() + constant_offsets[i], v.host.raw_data(), v.bytes());
      }
    }
    copy_host_to_device(plan->constants_.data(), packed.data(), constant_bytes, staging_, stream_.get());
  }
  auto address = [&](int id) -> void* {
    if (id < 0) return nullptr;
    const auto& v = s.values[static_cast<std::size_t>(id)];
    if (v.kind != Schedule::Kind::kHost) return static_cast<char*>(plan->workspace_.data()) + v.offset;
    if (v.initializer) return const_cast<void*>(upload_initializer(v.name, v.host));
    return static_cast<char*>(plan->constants_.data()) + constant_offsets[static_cast<std::size_t>(id)];
  };
  for (const auto& step : s.steps) {
    std::vector<DeviceArg> ins, outs;
    for (int id : step.inputs) {
      ins.push_back(id < 0 ? DeviceArg{} : DeviceArg{address(id), s.values[static_cast<std::size_t>(id)].dtype,
                                                      s.values[static_cast<std::size_t>(id)].shape});
    }
    for (int id : step.outputs) {
      outs.push_back(id < 0 ? DeviceArg{} : DeviceArg{address(id), s.values[static_cast<std::size_t>(id)].dtype,
                                                       s.values[static_cast<std::size_t>(id)].shape});
    }
    plan->step_workspaces_.push_back(address(step.workspace));
    plan->step_inputs_.push_back(std::move(ins));
    plan->step_outputs_.push_back(std::move(outs));
  }
  stream_.synchronize();
  // Tuning: kernels time their variants on this plan's buffers (nothing in the workspace is live
  // yet) and keep the fastest, so the graph below captures the picks.
  // The plan cache seeds the tuners' caches before the first plan, and keeps what they picked.
  TuneBudget budget{options_.tune_budget_ms};
  if (budget.ms_left > 0) {
    if (plan_cache_) plan_cache_->before_tuning();
    runtime::PickRecorder picks;
    for (std::size_t i = 0; i < s.steps.size(); ++i) {
      s.steps[i].kernel->tune(LaunchArgs{plan->step_inputs_[i], plan->step_outputs_[i], stream, plan->step_workspaces_[i]},
                              budget);
    }
    RW_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (plan_cache_) plan_cache_->after_tuning(picks);
  }
  if (options_.cuda_graph && !s.steps.empty()) {
    cudaGraph_t captured = nullptr;
    RW_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    try {
      plan->launch_steps(stream);
    } catch (...) {
      cudaStreamEndCapture(stream, &captured);
      if (captured != nullptr) cudaGraphDestroy(captured);
      throw;
    }
    RW_CUDA_CHECK(cudaStreamEndCapture(stream, &captured));
    const cudaError_t err = cudaGraphInstantiate(&plan->exec_, captured, 0);
    cudaGraphDestroy(captured);
    RW_CUDA_CHECK(err);
  }
  return plan;
}

Plan& GraphRunner::plan_for(const std::vector<Shape>& input_shapes) {
  if (auto* plan = plans_.find(input_shapes)) return **plan;
  // An evicted plan's graph and buffers go while nothing of it runs.
  if (plans_.size() >= plans_.capacity()) RW_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
  plans_.insert(input_shapes, make_plan(input_shapes, stream_.get()));
  return **plans_.find(input_shapes);
}

std::vector<Tensor> GraphRunner::run(const std::map<std::string, Tensor>& inputs) {
  std::vector<Shape> shapes;
  std::vector<const Tensor*> given;
  for (const ValueInfo& vi : graph_->inputs) {
    auto it = inputs.find(vi.name);
    RW_EXPECTS(it != inputs.end(), InvalidArgument, "{}: input '{}' is not given", graph_->name, vi.name);
    RW_EXPECTS(it->second.device() == Device::kCpu, InvalidArgument, "input '{}' must be a host tensor", vi.name);
    RW_EXPECTS(vi.dtype == DType::kUndefined || it->second.dtype() == vi.dtype, InvalidArgument,
               "input '{}' is {}, the graph declares {}", vi.name, it->second.description(), vi.description());
    shapes.push_back(it->second.shape());
    given.push_back(&it->second);
  }
  for (const auto& [name, t] : inputs) {
    const bool known = std::any_of(graph_->inputs.begin(), graph_->inputs.end(),
                                   [&](const ValueInfo& vi) { return vi.name == name; });
    RW_EXPECTS(known, InvalidArgument, "{}: '{}' is not an input of the graph", graph_->name, name);
  }
  Plan& plan = plan_for(shapes);
  const Schedule& s = plan.schedule();
  // Stage every input and output in one pinned buffer: inputs first, then outputs.
  std::size_t in_bytes = 0, out_bytes = 0;
  std::vector<Tensor> contiguous;
  for (const Tensor* t : given) {
    contiguous.push_back(t->contiguous());
    in_bytes += align_up(contiguous.back().nbytes());
  }
  for (int id : s.graph_outputs) out_bytes += align_up(s.values[static_cast<std::size_t>(id)].bytes());
  char* pinned = static_cast<char*>(staging_.reserve(std::max<std::size_t>(in_bytes + out_bytes, 1)));
  std::size_t at = 0;
  for (std::size_t i = 0; i < contiguous.size(); ++i) {
    const std::size_t bytes = contiguous[i].nbytes();
    if (bytes == 0) continue;
    std::memcpy(pinned + at, contiguous[i].raw_data(), bytes);
    RW_CUDA_CHECK(cudaMemcpyAsync(plan.input(i), pinned + at, bytes, cudaMemcpyHostToDevice, stream_.get()));
    at += align_up(bytes);
  }
  plan.enqueue(stream_.get());
  std::vector<std::size_t> out_at;
  for (std::size_t o = 0; o < s.graph_outputs.size(); ++o) {
    const auto& v = s.values[static_cast<std::size_t>(s.graph_outputs[o])];
    out_at.push_back(at);
    if (v.kind != Schedule::Kind::kHost && v.bytes() > 0) {
      RW_CUDA_CHECK(cudaMemcpyAsync(pinned + at, plan.output(o), v.bytes(), cudaMemcpyDeviceToHost, stream_.get()));
    }
    at += align_up(v.bytes());
  }
  stream_.synchronize();
  std::vector<Tensor> results;
  for (std::size_t o = 0; o < s.graph_outputs.size(); ++o) {
    const auto& v = s.values[static_cast<std::size_t>(s.graph_outputs[o])];
    if (v.kind == Schedule::Kind::kHost) {
      results.push_back(v.host.clone());
      continue;
    }
    Tensor t = Tensor::empty(v.dtype, v.shape);
    if (v.bytes() > 0) std::memcpy(t.raw_data(), pinned + out_at[o], v.bytes());
    results.push_back(std::move(t));
  }
  return results;
}

}  // namespace redwood::cuda
