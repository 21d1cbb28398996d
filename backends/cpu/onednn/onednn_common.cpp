#include "backends/cpu/onednn/onednn_common.hpp"

#include "core/host_threads.hpp"

#include <omp.h>

#include <atomic>

namespace redwood::cpu::onednn {

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  static dnnl::stream s(engine());
  return s;
}

Bound& Bound::bind(int arg, dnnl::memory m) {
  args_.push_back({arg, m.get()});
  memories_.push_back(std::move(m));
  return *this;
}

void Bound::set(int arg, const void* data) {
  for (std::size_t i = 0; i < args_.size(); ++i) {
    if (args_[i].arg == arg) return memories_[i].set_data_handle(const_cast<void*>(data));
  }
  throw Error(fmt::format("oneDNN argument {} is not bound", arg));
}

void Bound::execute() const {
  const dnnl_status_t status = dnnl_primitive_execute(prim_.get(), stream().get(), static_cast<int>(args_.size()), args_.data());
  if (status != dnnl_success) throw dnnl::error(status, "could not execute a primitive");
}

namespace {
std::atomic<int> wanted_threads{0};
}  // namespace

void set_threads(int threads) {
  if (threads > 0) {
    wanted_threads = threads;
    omp_set_num_threads(threads);
  }
}

void apply_threads() {
  // omp_set_num_threads sets the calling thread's count only: a kernel running on another thread
  // (a oneTBB worker of a pipeline, a CPU runner's) applies the wanted count once per thread. A
  // count HostThreads set for the thread (a host segment's) comes before the process's; outside
  // one, the thread goes back to the count it had.
  thread_local int applied = 0;  // what this thread set; 0: nothing
  thread_local int initial = 0;  // its count before
  int want = thread_host_threads();
  if (want <= 0) want = wanted_threads.load(std::memory_order_relaxed);
  if (want == applied) return;
  if (applied == 0) initial = omp_get_max_threads();
  omp_set_num_threads(want > 0 ? want : initial);
  applied = want;
}

dnnl::memory::desc plain_desc(const Shape& shape) {
  dims d(shape.begin(), shape.end());
  if (d.empty()) d.push_back(1);
  dims strides(d.size(), 1);
  for (std::size_t i = d.size() - 1; i-- > 0;) strides[i] = strides[i + 1] * d[i + 1];
  return dnnl::memory::desc(d, dt::f32, strides);
}

bool append_activation(dnnl::post_ops& po, const Epilogue& e) {
  using dnnl::algorithm;
  switch (e.act) {
    case Activation::kNone: return true;
    case Activation::kRelu: po.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f); return true;
    case Activation::kLeakyRelu: po.append_eltwise(1.f, algorithm::eltwise_relu, e.alpha, 0.f); return true;
    case Activation::kClip: po.append_eltwise(1.f, algorithm::eltwise_clip_v2, e.alpha, e.beta); return true;
    case Activation::kSigmoid: po.append_eltwise(1.f, algorithm::eltwise_logistic, 0.f, 0.f); return true;
    case Activation::kHardSwish: po.append_eltwise(1.f, algorithm::eltwise_hardswish, 0.f, 0.f); return true;
    case Activation::kHardSigmoid:
      po.append_eltwise(1.f, algorithm::eltwise_linear, e.alpha, e.beta);
      po.append_eltwise(1.f, algorithm::eltwise_clip_v2, 0.f, 1.f);
      return true;
  }
  return false;
}

FallbackKernel::FallbackKernel(const Node& node, const KernelInfo& info) {
  for (const KernelEntry* e : OpRegistry::instance().candidates(node.op_type, Device::kCpu)) {
    if (e->provider == kReferenceProvider) fallback_ = e->factory(node, info);
  }
  RW_EXPECTS(fallback_ != nullptr, Unsupported, "{}: no reference kernel to fall back on", node.where());
}

}  // namespace redwood::cpu::onednn
