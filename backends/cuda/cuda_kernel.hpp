#pragma once
// The contract of Redwood's CUDA kernels. A CUDA kernel is a core Kernel (so it lives in the op
// registry under Device::kCuda, provider "cuda") with two more steps, split so that a whole
// subgraph can be planned once per input shape and captured into a CUDA graph:
//
//   plan(PlanInfo)   host only, no CUDA call: checks the node against the input dtypes and shapes
//                    (and the values of inputs known on the host: initializers, shape arithmetic),
//                    returns each output's dtype and shape, and keeps what launch() needs
//                    (extents, the tile configuration). A kernel object serves one plan.
//   tune(args)       optional, once per plan before the CUDA graph is captured, with the plan's
//                    real addresses: a kernel with several ways to run (the convolution's tiles
//                    and split-K counts) may time them on args.stream and keep the fastest. It
//                    may synchronize; it must not change what launch() computes beyond rounding
//                    within the precision's tolerance.
//   launch(args)     queues the work on args.stream: no allocation, no synchronization, nothing
//                    that cannot be captured into a CUDA graph.
//
// Kernel::run() (the generic executor's entry) is implemented on top: host inputs are copied to
// the device, planned, launched, and the outputs copied back. The per-kernel tests use it.

#include "backends/cuda/cuda_options.hpp"
#include "core/kernel_info.hpp"
#include "core/op_registry.hpp"

#include <cuda_runtime_api.h>

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace redwood::cuda {

/// The provider name of Redwood's CUDA kernels in the op registry.
inline constexpr const char* kCudaProvider = "cuda";
inline constexpr int kCudaPriority = 10;

/// How convolutions and matrix products compute on fp32 tensors. Tensors stay fp32 between
/// kernels; the operands of the matrix units are rounded to the chosen type, and accumulation is
/// always fp32.
enum class Precision { kFp32, kTf32, kFp16, kBf16 };
std::string_view precision_name(Precision p);
/// "fp32", "tf32", "fp16", "bf16"; throws InvalidArgument naming the accepted values otherwise.
Precision parse_precision(std::string_view name);


struct PlanInfo {
  const Node& node;
  std::span<const TensorDesc> inputs;  // an absent optional input has dtype kUndefined
  Precision precision = Precision::kFp32;
  std::int64_t opset = 0;
  /// The runner's switches (which kernel families the tuners may pick from, cuda_options.hpp).
  CudaOptions options{};

  bool has_input(std::size_t i) const { return i < inputs.size() && inputs[i].defined(); }
  /// Input i, which must be present (InvalidArgument naming the node otherwise).
  const TensorDesc& input(std::size_t i) const;
  /// Input i's value on the host; throws Unsupported naming the node when it is only known on
  /// the device (the kernel needs it at plan time, e.g. Reshape's shape).
  const Tensor& host_input(std::size_t i, const char* what) const;
};

/// A device tensor as a launch sees it.
struct DeviceArg {
  void* data = nullptr;
  DType dtype = DType::kUndefined;
  Shape shape;
};

struct LaunchArgs {
  std::span<const DeviceArg> inputs;   // data == nullptr for an absent input
  std::span<const DeviceArg> outputs;
  cudaStream_t stream = nullptr;
  void* workspace = nullptr;           // workspace_bytes() of scratch, live during this launch only
};

/// Device time a plan may still spend in tune() (GraphRunner::make_plan); kernels past it keep
/// their untimed default.
struct TuneBudget {
  double ms_left = 0;
};

class CudaKernel : public Kernel {
 public:
  virtual std::vector<TensorDesc> plan(const PlanInfo& info) = 0;
  virtual void launch(const LaunchArgs& args) = 0;
  /// Device scratch launch() needs (after plan()); the runner packs it into its workspace.
  virtual std::size_t workspace_bytes() const { return 0; }
  /// Picks among the kernel's variants by measurement (see above); the default has none.
  virtual void tune(const LaunchArgs& /*args*/, TuneBudget& /*budget*/) {}
  /// The variant launch() runs and how it was chosen, for logs and `redwood_gpu_bench --verbose`
  /// (empty for kernels with one way to run).
  virtual std::string variant() const { return {}; }
  /// Host path: copies inputs to the device, plans at `precision()`, launches, copies back.
  void run(KernelContext& ctx) override;

  void set_precision(Precision p) { precision_ = p; }
  Precision precision() const { return precision_; }
  /// The switches run() plans with (the runner passes its own in PlanInfo).
  void set_options(const CudaOptions& o) { options_ = o; }
  const CudaOptions& options() const { return options_; }

 private:
  Precision precision_ = Precision::kFp32;
  CudaOptions options_{};
};

/// Registers a CudaKernel type constructible from (const Node&, const KernelInfo&) for op_type.
#define RW_REGISTER_CUDA_KERNEL(op_type, KernelType)                                        \
  RW_REGISTER_PROVIDER_KERNEL(op_type, ::redwood::Device::kCuda, ::redwood::cuda::kCudaProvider, \
                              ::redwood::cuda::kCudaPriority, ::redwood::make_factory<KernelType>())

/// Multiprocessors of the device plans are made for (backends/cuda/device.hpp, planning_device():
/// the current GPU, else the planning target's 132). For tile and split choices at plan time.
int multiprocessor_count();

/// Throws Unsupported naming the node unless `dtype` is fp32 (the CUDA kernels' tensor type).
void expect_f32(const Node& node, DType dtype, const char* what = "input");
/// ceil(a / b) for positive b.
inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace redwood::cuda
