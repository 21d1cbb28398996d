// The "cuda" model runner: the infer stage's engine when a model says `device: cuda` (see
// core/model_runner.hpp). A GraphRunner on device 0 at the model's precision; a plan (workspace,
// CUDA graph) per distinct input shape, built on first use. Registered from a static
// initializer, so binaries link redwood::backend_cuda with redwood_link_registered().

#include "backends/cuda/device_arch.hpp"
#include "backends/cuda/device_probe.hpp"
#include "backends/cuda/graph_runner.hpp"
#include "core/model_runner.hpp"

#include <fmt/format.h>

#include <mutex>

namespace redwood::cuda {
namespace {

class CudaModelRunner final : public ModelRunner {
 public:
  CudaModelRunner(std::shared_ptr<const Graph> graph, Precision precision, std::string device_name)
      : runner_(std::move(graph), RunnerOptions{.precision = precision}), device_name_(std::move(device_name)) {
    // A model whose input shapes are all fixed is planned now, so that an op without a CUDA
    // kernel fails at load rather than on the first frame.
    std::vector<Shape> shapes;
    for (const ValueInfo& in : runner_.graph().inputs) {
      if (!in.has_shape) return;
      Shape s;
      for (const Dim& d : in.dims) {
        if (!d.known()) return;
        s.push_back(d.value);
      }
      shapes.push_back(std::move(s));
    }
    runner_.plan_for(shapes);
  }

  std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs) override {
    // One stream and one staging buffer per runner: runs take turns.
    std::lock_guard lock(mutex_);
    return runner_.run(inputs);
  }

  std::string description() const override {
    return fmt::format("cuda:0 ({}), {}", device_name_, precision_name(runner_.options().precision));
  }

 private:
  std::mutex mutex_;
  GraphRunner runner_;
  std::string device_name_;
};

// Why GPU 0 cannot run models, or "": no device (CUDA's reason), or a device this build carries
// no code for (device_arch.hpp), which would otherwise fail at the first kernel launch.
std::string unavailable_reason(const ProbeResult& probe) {
  if (probe.devices.empty()) {
    return fmt::format("{} (CUDA runtime {}, driver {})", probe.error.empty() ? "no CUDA device found" : probe.error,
                       probe.runtime_version, probe.driver_version);
  }
  return architecture_problem(probe.devices[0]);
}

std::string cuda_unavailable() { return unavailable_reason(probe_devices()); }

std::unique_ptr<ModelRunner> make_cuda_runner(std::shared_ptr<const Graph> graph, const std::string& precision) {
  const ProbeResult probe = probe_devices();
  const std::string why = unavailable_reason(probe);
  RW_EXPECTS(why.empty(), Unsupported, "no usable CUDA device: {}", why);
  return std::make_unique<CudaModelRunner>(std::move(graph), parse_precision(precision), probe.devices[0].name);
}

[[maybe_unused]] const bool registered = register_device_runner("cuda", {cuda_unavailable, make_cuda_runner});

}  // namespace
}  // namespace redwood::cuda
