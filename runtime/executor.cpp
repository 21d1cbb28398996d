#include "runtime/executor.hpp"

#include "core/error.hpp"
#include "core/kernel_info.hpp"
#include "core/kernel_select.hpp"
#include "memory/liveness_planner.hpp"
#include "core/passes/compute_in_fp32.hpp"

#include <algorithm>
#include <chrono>
#include <set>

namespace redwood {

Executor::Executor(std::shared_ptr<const Graph> graph, ExecutorOptions options)
    : graph_(std::move(graph)), options_(options) {
  plans_ = decltype(plans_)(options_.max_plans);
  shape_values_ = decltype(shape_values_)(options_.max_plans);
  // On the CPU an fp16/bf16 graph computes in fp32 (compute_in_fp32), optimized or not: the
  // kernels could not run it otherwise. Regions (one composite node per group of oneDNN nodes)
  // only when other providers than the reference one may run.
  const std::vector<passes::NamedPass> pipeline =
      options_.device == Device::kCpu
          ? passes::cpu_pipeline(*graph_, options_.optimize, !options_.reference_only, options_.compute_in_fp32)
          : options_.optimize ? passes::default_pipeline(!options_.reference_only) : std::vector<passes::NamedPass>{};
  if (!pipeline.empty()) {
    auto optimized = std::make_shared<Graph>(*graph_);
    pass_records_ = passes::optimize(*optimized, pipeline);
    graph_ = std::move(optimized);
  }
  const Graph& g = *graph_;
  flow_ = runtime::make_dataflow(g);
  constants_.resize(flow_.size());
  for (const auto& [name, t] : g.initializers) constants_[static_cast<std::size_t>(flow_.ids.at(name))] = t;

  // Kernels, created at load so that unsupported nodes are reported before any run.
  std::vector<std::string> problems;
  for (const auto& node : g.nodes) {
    try {
      SelectedKernel selected = select_kernel(node, declared_kernel_info(g, node), options_.device,
                                              options_.reference_only ? reference_provider_only : ProviderFilter{});
      providers_.push_back(std::move(selected.provider));
      kernels_.push_back(std::move(selected.kernel));
    } catch (const Error& e) {
      std::string failure = e.what();
      if (failure.find(node.where()) == std::string::npos) failure = node.where() + ": " + failure;
      problems.push_back(std::move(failure));
      providers_.emplace_back();
      kernels_.emplace_back();
    }
  }
  if (!problems.empty()) {
    std::string msg = fmt::format("{}: {} node(s) cannot run on {}:", g.source.empty() ? g.name : g.source,
                                  problems.size(), device_name(options_.device));
    for (const auto& p : problems) msg += "\n  " + p;
    throw Unsupported(msg);
  }

  // When each intermediate can be released (after its last consumer).
  std::set<int> keep(flow_.graph_outputs.begin(), flow_.graph_outputs.end());
  release_after_.resize(g.nodes.size());
  for (std::size_t s = 0; s < flow_.size(); ++s) {
    const int last = flow_.last_use[s];
    if (last >= 0 && !keep.count(static_cast<int>(s)) && !constants_[s].defined()) {
      release_after_[static_cast<std::size_t>(last)].push_back(static_cast<int>(s));
    }
  }
  find_shape_folded_nodes();
}

void Executor::find_shape_folded_nodes() {
  shape_folded_.assign(graph_->nodes.size(), false);
  if (!options_.optimize || !options_.fold_shapes) return;
  shape_folded_ = runtime::shape_determined_nodes(*graph_, flow_);
  for (std::size_t i = 0; i < shape_folded_.size(); ++i) {
    if (shape_folded_[i]) shape_folded_nodes_.push_back(i);
  }
}

Executor::~Executor() = default;

// ---- memory plan ----

namespace {
constexpr std::size_t kHeap = SIZE_MAX;       // an output that is not in the workspace
constexpr std::size_t kWorkspaceAlignment = 64;  // Tensor::empty's: a cache line, AVX-512

std::size_t bytes_of(DType dtype, const Shape& shape) {
  return static_cast<std::size_t>(shape_numel(shape)) * dtype_size(dtype);
}
}  // namespace

struct Executor::MemoryPlan {
  std::vector<std::vector<std::size_t>> offsets;  // [node][output]: offset, or kHeap
  std::vector<std::vector<std::size_t>> bytes;    // [node][output]: planned bytes
  WorkspaceStats stats;
  std::mutex mutex;
  std::vector<std::shared_ptr<Storage>> idle;     // workspaces no run is using
};

/// Serves allocate_output for one run, in one of three modes: heap (no plan), record (the first
/// run of a signature: heap, remembering what each node allocated and which outputs are views
/// of which allocation), planned (views into a workspace).
class Executor::OutputPlacer final : public OutputAllocator {
 public:
  enum class Mode { kHeap, kRecord, kPlanned };
  struct Root {                     // one buffer allocate_output made, while recording
    std::size_t node, output, bytes;
    const std::byte* data;
    std::int64_t last;              // last step that reads it or a view of it
    bool escapes = false;           // a graph output is it or views it
  };

  Mode mode = Mode::kHeap;
  std::size_t node = 0;
  // kPlanned
  const MemoryPlan* plan = nullptr;
  std::byte* workspace = nullptr;
  bool off_plan = false;            // a request the plan did not foresee (went to the heap)
  // Where what the plan leaves off the workspace (the graph outputs) comes from; null: the heap.
  const std::function<Tensor(DType, const Shape&)>* outside = nullptr;
  // kRecord
  struct Made {
    std::size_t output;
    const void* data;
    std::size_t bytes;
  };
  std::vector<Made> made;           // this node's allocations
  std::vector<Root> roots;

  Tensor allocate(std::size_t output, DType dtype, Shape shape) override {
    const std::size_t bytes = bytes_of(dtype, shape);
    if (mode == Mode::kPlanned) {
      const auto& offs = plan->offsets[node];
      if (output >= offs.size()) {
        off_plan = true;
      } else if (offs[output] != kHeap) {
        if (bytes > plan->bytes[node][output]) off_plan = true;
        else if (bytes != 0) return Tensor::view(workspace + offs[output], dtype, std::move(shape));
      }
    }
    if (mode == Mode::kPlanned && outside != nullptr && *outside && !off_plan) {
      Tensor t = (*outside)(dtype, shape);
      if (t.defined()) return t;
    }
    Tensor t = Tensor::empty(dtype, std::move(shape));
    if (mode == Mode::kRecord) made.push_back({output, t.raw_data(), bytes});
    return t;
  }

  /// After node `node` ran (record mode): which outputs are new buffers, which are views of a
  /// live one, and how long each buffer must live.
  void observe(std::span<const Tensor> outputs, const std::vector<int>& slots,
               const std::vector<int>& last_use, const std::vector<bool>& is_graph_output) {
    const auto step = static_cast<std::int64_t>(node);
    for (std::size_t o = 0; o < outputs.size(); ++o) {
      const auto* p = static_cast<const std::byte*>(outputs[o].raw_data());
      const int slot = slots[o];
      std::size_t r = SIZE_MAX;
      for (const Made& m : made) {
        if (m.output == o && m.data == p && p != nullptr) {
          roots.push_back({node, o, m.bytes, p, step});
          r = roots.size() - 1;
          break;
        }
      }
      if (r == SIZE_MAX && p != nullptr) {
        // A view of a buffer that is still alive (its storage is freed after its last reader,
        // so a dead one's address may have been reused).
        for (std::size_t i = roots.size(); i-- > 0;) {
          const Root& root = roots[i];
          if (root.last >= step && root.bytes != 0 && p >= root.data && p < root.data + root.bytes) {
            r = i;
            break;
          }
        }
      }
      if (r == SIZE_MAX || slot < 0) continue;
      roots[r].last = std::max<std::int64_t>(roots[r].last, last_use[slot]);
      if (is_graph_output[slot]) roots[r].escapes = true;
    }
    made.clear();
  }
};

std::shared_ptr<Executor::MemoryPlan> Executor::record_plan(const OutputPlacer& placer) const {
  auto plan = std::make_shared<MemoryPlan>();
  const Graph& g = *graph_;
  plan->offsets.resize(g.nodes.size());
  plan->bytes.resize(g.nodes.size());
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    plan->offsets[i].assign(flow_.node_outputs[i].size(), kHeap);
    plan->bytes[i].assign(flow_.node_outputs[i].size(), 0);
  }
  std::vector<memory::TensorLifetime> lifetimes;
  std::vector<const OutputPlacer::Root*> placed;
  for (const auto& root : placer.roots) {
    if (root.escapes) {
      ++plan->stats.heap_tensors;
      continue;
    }
    lifetimes.push_back({root.bytes, static_cast<std::int64_t>(root.node), root.last});
    placed.push_back(&root);
  }
  const memory::WorkspacePlan wp = memory::plan_workspace(lifetimes, kWorkspaceAlignment);
  for (std::size_t i = 0; i < placed.size(); ++i) {
    plan->offsets[placed[i]->node][placed[i]->output] = wp.offsets[i];
    plan->bytes[placed[i]->node][placed[i]->output] = placed[i]->bytes;
  }
  plan->stats.workspace_bytes = wp.workspace_bytes;
  plan->stats.lower_bound = wp.lower_bound;
  plan->stats.planned_tensors = placed.size();
  plan->stats.steps = g.nodes.size();
  // The first workspace now, so that the plan's runs allocate none (a runner that prepares its
  // batch sizes records their plans before the first batch).
  if (plan->stats.workspace_bytes != 0) {
    plan->idle.push_back(Storage::allocate_host(plan->stats.workspace_bytes));
    workspace_allocations_.fetch_add(1);
  }
  return plan;
}

/// One run's scratch, kept across runs: the value slots, the signature, the kernels' argument
/// lists and a capture of shape values.
struct Executor::Scratch {
  std::vector<Tensor> values;
  std::vector<std::int64_t> signature;
  std::vector<Tensor> in_buf, out_buf;
};

std::vector<Tensor> Executor::run(const std::map<std::string, Tensor>& inputs,
                                  const std::function<Tensor(DType, const Shape&)>* allocate) {
  runtime::check_inputs(*graph_, inputs, options_.device);
  std::vector<Tensor> ordered;
  for (const auto& vi : graph_->inputs) ordered.push_back(inputs.at(vi.name));
  std::vector<Tensor> outputs;
  run_checked(ordered, outputs, allocate);
  return outputs;
}

void Executor::run_into(std::span<const Tensor> inputs, std::vector<Tensor>& outputs,
                        const std::function<Tensor(DType, const Shape&)>* allocate) {
  runtime::check_inputs(*graph_, inputs, options_.device);
  run_checked(inputs, outputs, allocate);
}

void Executor::run_checked(std::span<const Tensor> inputs, std::vector<Tensor>& outputs,
                           const std::function<Tensor(DType, const Shape&)>* allocate) {
  std::unique_ptr<Scratch> scratch;
  {
    std::lock_guard lock(scratch_mutex_);
    if (!idle_scratch_.empty()) {
      scratch = std::move(idle_scratch_.back());
      idle_scratch_.pop_back();
    }
  }
  if (scratch == nullptr) scratch = std::make_unique<Scratch>();
  struct GiveBack {
    Executor& executor;
    std::unique_ptr<Scratch>& scratch;
    ~GiveBack() {
      // Nothing of the run stays referenced: the slots' tensors go now, their room stays.
      scratch->values.clear();
      scratch->in_buf.clear();
      scratch->out_buf.clear();
      std::lock_guard lock(executor.scratch_mutex_);
      executor.idle_scratch_.push_back(std::move(scratch));
    }
  } give_back{*this, scratch};

  const Graph& g = *graph_;
  std::vector<Tensor>& values = scratch->values;
  values.assign(constants_.begin(), constants_.end());
  std::vector<std::int64_t>& signature = scratch->signature;
  signature.clear();
  for (std::size_t i = 0; i < g.inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    values[static_cast<std::size_t>(flow_.graph_inputs[i])] = t;
    signature.push_back(static_cast<std::int64_t>(t.dtype()));
    signature.push_back(t.rank());
    signature.insert(signature.end(), t.shape().begin(), t.shape().end());
  }
  // Per-shape folding: this signature's shape-chain values, or capture them on this run.
  std::shared_ptr<const ShapeValues> folded;
  ShapeValues captured;
  const bool folding = !shape_folded_nodes_.empty();
  if (folding) {
    std::lock_guard lock(plans_mutex_);
    if (auto* found = shape_values_.find(signature)) folded = *found;
  }
  OutputPlacer placer;
  placer.outside = allocate;
  run_signature(*scratch, placer, outputs, folded.get(), folding && !folded ? &captured : nullptr);
  if (folding && !folded) {
    std::lock_guard lock(plans_mutex_);
    shape_values_.insert(signature, std::make_shared<const ShapeValues>(std::move(captured)));
  }
}

void Executor::run_signature(Scratch& scratch, OutputPlacer& placer, std::vector<Tensor>& outputs,
                             const ShapeValues* folded, ShapeValues* capture) {
  if (!options_.plan_memory) return run_nodes(scratch, placer, outputs, folded, capture);
  const std::vector<std::int64_t>& signature = scratch.signature;

  std::shared_ptr<MemoryPlan> plan;
  {
    std::lock_guard lock(plans_mutex_);
    if (auto* found = plans_.find(signature)) plan = *found;
  }
  if (plan == nullptr) {
    placer.mode = OutputPlacer::Mode::kRecord;
    run_nodes(scratch, placer, outputs, folded, capture);
    auto recorded = record_plan(placer);
    std::lock_guard lock(plans_mutex_);
    plans_.insert(signature, recorded);
    last_plan_ = std::move(recorded);
    return;
  }

  // A workspace of this signature that no other run is using, else a new one.
  std::shared_ptr<Storage> workspace;
  {
    std::lock_guard lock(plan->mutex);
    if (!plan->idle.empty()) {
      workspace = std::move(plan->idle.back());
      plan->idle.pop_back();
    }
  }
  if (workspace == nullptr && plan->stats.workspace_bytes != 0) {
    workspace = Storage::allocate_host(plan->stats.workspace_bytes);
    workspace_allocations_.fetch_add(1);
  }
  placer.mode = OutputPlacer::Mode::kPlanned;
  placer.plan = plan.get();
  placer.workspace = workspace ? static_cast<std::byte*>(workspace->data()) : nullptr;
  struct GiveBack {
    MemoryPlan& plan;
    std::shared_ptr<Storage>& workspace;
    ~GiveBack() {
      if (workspace == nullptr) return;
      std::lock_guard lock(plan.mutex);
      plan.idle.push_back(std::move(workspace));
    }
  } give_back{*plan, workspace};
  run_nodes(scratch, placer, outputs, folded, capture);
  // Every view into the workspace goes before it is given back.
  scratch.values.clear();
  scratch.in_buf.clear();
  scratch.out_buf.clear();
  // Insurance: a graph output must never view the workspace (the recording saw none do so).
  const auto* lo = placer.workspace;
  const auto* hi = lo + plan->stats.workspace_bytes;
  for (Tensor& t : outputs) {
    const auto* p = static_cast<const std::byte*>(t.raw_data());
    if (lo != nullptr && p >= lo && p < hi) {
      t = t.clone();
      placer.off_plan = true;
    }
  }
  if (placer.off_plan) {
    // Shapes that depend on values, not only on the input shapes: plan again next time.
    std::lock_guard lock(plans_mutex_);
    plans_.erase(signature);
  }
}

void Executor::run_nodes(Scratch& scratch, OutputPlacer& placer, std::vector<Tensor>& outputs,
                         const ShapeValues* folded, ShapeValues* capture) {
  const Graph& g = *graph_;
  std::vector<Tensor>& values = scratch.values;
  if (profiling_) timings_.clear();
  if (folded != nullptr) {
    for (const auto& [slot, value] : *folded) values[slot] = value;
  }
  std::vector<Tensor>& in_buf = scratch.in_buf;
  std::vector<Tensor>& out_buf = scratch.out_buf;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& node = g.nodes[i];
    if (folded != nullptr && shape_folded_[i]) {
      for (int s : release_after_[i]) values[s] = Tensor();
      continue;
    }
    in_buf.clear();
    for (int s : flow_.node_inputs[i]) in_buf.push_back(s >= 0 ? values[static_cast<std::size_t>(s)] : Tensor());
    out_buf.assign(flow_.node_outputs[i].size(), Tensor());
    placer.node = i;
    KernelContext ctx{in_buf, out_buf, node, &placer};
    if (profiling_ && !node.body.empty()) {
      body_ms_.assign(node.body.size(), 0.0);
      ctx.body_ms = &body_ms_;
    }
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
      double around = ms.count();
      if (ctx.body_ms != nullptr) {
        for (std::size_t b = 0; b < node.body.size(); ++b) {
          if (body_ms_[b] <= 0) continue;
          timings_.push_back({node.body[b].name, node.body[b].op_type, providers_[i], body_ms_[b], node.name});
          around -= body_ms_[b];
        }
      }
      timings_.push_back({node.name, node.op_type, providers_[i], std::max(0.0, around), ""});
    }
    if (placer.mode == OutputPlacer::Mode::kRecord) placer.observe(out_buf, flow_.node_outputs[i], flow_.last_use, flow_.is_graph_output);
    for (std::size_t o = 0; o < flow_.node_outputs[i].size(); ++o) {
      const int s = flow_.node_outputs[i][o];
      if (s < 0) continue;
      RW_EXPECTS(out_buf[o].defined(), Error, "{}: kernel produced no output {}", node.where(), o);
      // A heap copy: the output may view this run's workspace.
      if (capture != nullptr && shape_folded_[i]) capture->emplace_back(s, out_buf[o].clone());
      values[s] = std::move(out_buf[o]);
    }
    for (int s : release_after_[i]) values[s] = Tensor();
  }
  outputs.clear();
  for (int s : flow_.graph_outputs) outputs.push_back(values[static_cast<std::size_t>(s)]);
}

WorkspaceStats Executor::workspace_stats() const {
  std::lock_guard lock(plans_mutex_);
  return last_plan_ ? last_plan_->stats : WorkspaceStats{};
}

std::size_t Executor::planned_signatures() const {
  std::lock_guard lock(plans_mutex_);
  return plans_.size();
}

}  // namespace redwood
