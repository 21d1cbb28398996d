#pragma once
// Shared pieces of the oneDNN provider (backends/cpu/onednn): the engine and stream, the thread
// count, memory descriptors for Redwood's dense row-major tensors, the epilogue as post-ops, and
// the base class every oneDNN kernel derives from.
//
// Every oneDNN kernel keeps the reference kernel of its node as a fallback: a factory throws
// Unsupported for what oneDNN cannot do at all (the executor then picks the reference provider),
// and a run whose shapes or dtypes oneDNN cannot take goes to the fallback, which also reports
// invalid inputs with the reference kernels' messages. Primitives are cached per input shapes.
//
// Threads: Debian's oneDNN 2.6 is built with the OpenMP runtime, so oneDNN's workers are
// OpenMP's, not oneTBB's; set_threads() makes both follow Redwood's thread count. oneDNN is only
// called from the executor's thread, never from inside a oneTBB parallel region.

#include "backends/cpu/reference/epilogue.hpp"
#include "core/error.hpp"
#include "core/op_registry.hpp"

#include <oneapi/dnnl/dnnl.hpp>

#include <map>
#include <memory>
#include <vector>

namespace redwood::cpu::onednn {

inline constexpr const char* kProvider = "onednn";
inline constexpr int kPriority = 10;

dnnl::engine& engine();
dnnl::stream& stream();

/// Sets oneDNN's (OpenMP's) worker count; 0 leaves the default (all cores, or OMP_NUM_THREADS).
void set_threads(int threads);
/// Applies the calling thread's count to OpenMP (whose count is per thread): the one HostThreads
/// set for it (core/host_threads.hpp), else set_threads'. Every oneDNN kernel calls it before it
/// makes or runs primitives.
void apply_threads();

using dims = dnnl::memory::dims;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

/// Plain (row-major) descriptor of a shape; rank 0 becomes {1}.
dnnl::memory::desc plain_desc(const Shape& shape);
/// A memory over a tensor's (contiguous) data.
inline dnnl::memory wrap(const dnnl::memory::desc& md, const Tensor& t) {
  return dnnl::memory(md, engine(), t.raw_data());
}

/// A primitive with its arguments bound once, executed through oneDNN's C entry point. oneDNN's
/// C++ execute() builds a hash map and a vector of the arguments on every call; a Bound makes its
/// memories when the primitive is built (over no data), set() points them at a run's tensors,
/// and execute() passes the prepared argument array: a primitive's run allocates nothing on
/// Redwood's side (oneDNN 2.6 still builds its own argument map inside, per run).
class Bound {
 public:
  Bound() = default;
  explicit Bound(dnnl::primitive prim) : prim_(std::move(prim)) {}
  /// Binds argument `arg` (a DNNL_ARG_*) to a memory of `md` whose data set() gives per run.
  Bound& bind(int arg, const dnnl::memory::desc& md) { return bind(arg, dnnl::memory(md, engine(), DNNL_MEMORY_NONE)); }
  /// Binds `arg` to a memory that keeps its data (weights, a plan's intermediate buffer).
  Bound& bind(int arg, dnnl::memory m);
  /// Points bound argument `arg` at `data` for the next runs.
  void set(int arg, const void* data);
  /// Executes on stream(), without waiting for it.
  void execute() const;

 private:
  dnnl::primitive prim_;
  std::vector<dnnl::memory> memories_;  // own the handles args_ names
  std::vector<dnnl_exec_arg_t> args_;
};

/// Appends the activation of `e` as eltwise post-ops; false when oneDNN has no equivalent.
bool append_activation(dnnl::post_ops& po, const Epilogue& e);

/// Base of the oneDNN kernels: the reference kernel as fallback.
class FallbackKernel : public Kernel {
 public:
  FallbackKernel(const Node& node, const KernelInfo& info);
  void run(KernelContext& ctx) final {
    apply_threads();
    if (!run_onednn(ctx)) fallback_->run(ctx);
  }

 protected:
  /// Computes the node with oneDNN; returns false (having written nothing) to use the fallback.
  virtual bool run_onednn(KernelContext& ctx) = 0;

 private:
  std::unique_ptr<Kernel> fallback_;
};

/// Factory helper: constructs K (which throws Unsupported when oneDNN cannot serve the node).
template <typename K>
KernelFactory make_onednn_factory() {
  return [](const Node& node, const KernelInfo& info) -> std::unique_ptr<Kernel> {
    return std::make_unique<K>(node, info);
  };
}

/// All inputs present are fp32 tensors.
inline bool all_f32(const KernelContext& ctx) {
  for (const auto& t : ctx.inputs) {
    if (t.defined() && t.dtype() != DType::kF32) return false;
  }
  return true;
}

/// Reorders between two memories.
inline void reorder(dnnl::memory& from, dnnl::memory& to) {
  dnnl::reorder(from, to).execute(stream(), from, to);
}

}  // namespace redwood::cpu::onednn
