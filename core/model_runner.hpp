#pragma once
// ModelRunner: what the infer stage calls to run one model, whatever the device: host tensors in,
// host tensors out. The CPU runner wraps the Executor; other devices register a factory here
// from their backend ("cuda": backends/cuda/cuda_model_runner.cpp, a whole-archive link), so
// stages need no backend's headers or libraries, and a build without CUDA simply has no "cuda"
// entry and says so.

#include "core/graph/graph.hpp"
#include "core/tensor.hpp"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace redwood {

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  /// Every graph input by name; returns the graph outputs in the graph's order, on the host.
  virtual std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs) = 0;
  /// "cpu", "cuda:0 (NVIDIA H200), fp16": for logs.
  virtual std::string description() const = 0;
};

/// The CPU runner: the default Executor (optimized, oneDNN before the reference kernels).
std::unique_ptr<ModelRunner> make_cpu_runner(std::shared_ptr<const Graph> graph);

/// How a backend other than the CPU makes runners.
struct DeviceRunnerFactory {
  /// Why this process cannot run models on the device ("" when it can), e.g. CUDA's error for
  /// "no device". Cheap enough to ask once per model at load.
  std::function<std::string()> unavailable;
  /// A runner for `graph` at `precision` ("fp32", "tf32", "fp16", "bf16"); throws redwood::Error.
  std::function<std::unique_ptr<ModelRunner>(std::shared_ptr<const Graph> graph, const std::string& precision)> make;
};

/// Device name ("cuda") -> factory; filled by static registration in the backends.
std::map<std::string, DeviceRunnerFactory>& device_runner_registry();
bool register_device_runner(const std::string& device, DeviceRunnerFactory factory);

}  // namespace redwood
