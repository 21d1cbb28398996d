#include "core/model_runner.hpp"

#include "core/executor.hpp"

namespace redwood {
namespace {

class CpuRunner final : public ModelRunner {
 public:
  explicit CpuRunner(std::shared_ptr<const Graph> graph) : executor_(std::move(graph)) {}
  std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs) override { return executor_.run(inputs); }
  std::string description() const override { return "cpu"; }

 private:
  Executor executor_;
};

}  // namespace

std::unique_ptr<ModelRunner> make_cpu_runner(std::shared_ptr<const Graph> graph) {
  return std::make_unique<CpuRunner>(std::move(graph));
}

std::map<std::string, DeviceRunnerFactory>& device_runner_registry() {
  static std::map<std::string, DeviceRunnerFactory> registry;
  return registry;
}

bool register_device_runner(const std::string& device, DeviceRunnerFactory factory) {
  device_runner_registry()[device] = std::move(factory);
  return true;
}

}  // namespace redwood
