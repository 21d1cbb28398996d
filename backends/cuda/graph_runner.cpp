#include "backends/cuda/graph_runner.hpp"

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/device.hpp"
#include "backends/cuda/device_arch.hpp"
#include "backends/cuda/device_memory.hpp"
#include "backends/cuda/kernel_select.hpp"
#include "backends/cuda/kernels/pdl.cuh"
#include "backends/cuda/passes/gpu_pipeline.hpp"
#include "backends/cuda/plan_cache.hpp"
#include "core/error.hpp"
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

}  // namespace

Schedule build_schedule(const Graph& graph, const std::vector<Shape>& input_shapes, Precision precision,
                        const CudaOptions& options) {
  const runtime::StepPlanner plan_step = [precision, options](const Graph& g, const Node& node,
                                                              const std::vector<TensorDesc>& inputs) {
    SelectedKernel selected = select_cuda_kernel(g, node, inputs);
    selected.kernel->set_precision(precision);
    selected.kernel->set_options(options);
    runtime::StepPlan planned;
    planned.outputs = selected.kernel->plan(PlanInfo{node, inputs, precision, g.opset, options});
    planned.workspace_bytes = selected.kernel->workspace_bytes();
    planned.provider = std::move(selected.provider);
    planned.kernel = std::move(selected.kernel);
    return planned;
  };
  return runtime::build_schedule(graph, input_shapes, plan_step, kAlignment);
}

CudaKernel& cuda_kernel(const Schedule::Step& step) {
  // Every step of a schedule build_schedule made holds the CudaKernel select_cuda_kernel chose.
  return static_cast<CudaKernel&>(*step.kernel);
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
    if (std::string v = cuda_kernel(step).variant(); !v.empty()) out.push_back(std::move(v));
  }
  return out;
}

void Plan::launch_steps(cudaStream_t stream) {
  // A failed runtime call elsewhere leaves its error for cudaGetLastError: clear it, so that each
  // launch check reports only its own kernel's failure.
  cudaGetLastError();
  const kernels::ProgrammaticLaunchScope pdl(pdl_);
  for (std::size_t i = 0; i < schedule_.steps.size(); ++i) {
    cuda_kernel(schedule_.steps[i]).launch(LaunchArgs{step_inputs_[i], step_outputs_[i], stream, step_workspaces_[i]});
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
  const kernels::ProgrammaticLaunchScope pdl(pdl_);
  for (int r = 0; r < runs; ++r) {
    cudaGetLastError();
    marks[0].record(stream);
    for (std::size_t i = 0; i < n; ++i) {
      cuda_kernel(schedule_.steps[i]).launch(LaunchArgs{step_inputs_[i], step_outputs_[i], stream, step_workspaces_[i]});
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
  return options.cuda.space_to_depth_stem && nhwc_storage(options).has_value();
}

std::vector<passes::NamedPass> runner_pipeline(const RunnerOptions& options) {
  // Without form_regions (its fused regions are for the CPU providers), with elementwise chains,
  // and at fp16/bf16/tf32/fp32 with NHWC activations between convolutions (choose_gpu_layout).
  // At tf32 the NHWC groups hold tf32-rounded operands (exact for wgmma's truncating tf32).
  const std::optional<DType> storage = nhwc_storage(options);
  passes::GpuPipelineOptions p;
  p.nhwc_storage = storage;
  p.round_tf32 = storage.has_value() && options.precision == Precision::kTf32;
  p.space_to_depth_stem = space_to_depth_stem(options);
  p.fuse_shortcuts = options.cuda.fuse_conv_shortcuts;
  return passes::gpu_pipeline(p);
}

GraphRunner::GraphRunner(std::shared_ptr<const Graph> graph, RunnerOptions options)
    : options_(options), plans_(options.max_plans) {
  RW_EXPECTS(graph != nullptr, InvalidArgument, "GraphRunner: no graph");
  // A GPU this build carries no code for would fail at the first launch with CUDA's terse "no
  // kernel image"; say which GPU and which architectures were built instead (device_arch.hpp).
  int device = 0;
  RW_CUDA_CHECK(cudaGetDevice(&device));
  device_ = device;
  const ProbeResult& probe = cuda_devices();
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
    pass_records_ = passes::optimize(*copy, runner_pipeline(options_));
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
  plan->schedule_ = build_schedule(*graph_, input_shapes, options_.precision, options_.cuda);
  plan->pdl_ = options_.cuda.pdl;
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
    const kernels::ProgrammaticLaunchScope pdl(plan->pdl_);
    for (std::size_t i = 0; i < s.steps.size(); ++i) {
      cuda_kernel(s.steps[i]).tune(LaunchArgs{plan->step_inputs_[i], plan->step_outputs_[i], stream, plan->step_workspaces_[i]},
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
