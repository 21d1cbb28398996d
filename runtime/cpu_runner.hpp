#pragma once
// The CPU runner, and the one call that makes a runner for any device.
//
// The CPU runner is the CPU executable (runtime/executor.hpp: the model optimized, oneDNN before
// the reference kernels) behind the ModelRunner contract (core/model_runner.hpp): batches queue
// for one worker thread of its own ("rw-cpu-infer"), `config.slots` of them at most, and complete
// in submit order on that thread. Other devices' runners come from the registry their backends
// fill (device_runner_registry); make_runner asks it for every name but "cpu".

#include "core/model_runner.hpp"

#include <memory>
#include <string>
#include <thread>

namespace redwood {

/// The CPU runner: the default Executor (optimized, oneDNN before the reference kernels) on one
/// worker thread, `config.slots` batches queued at most.
std::unique_ptr<ModelRunner> make_cpu_runner(std::shared_ptr<const Graph> graph, const RunnerConfig& config = {});

/// A runner for `graph` on `device`: "cpu" (make_cpu_runner), or a device the registry has.
/// Throws Unsupported naming the device when this Redwood has none of that name.
std::unique_ptr<ModelRunner> make_runner(const std::string& device, std::shared_ptr<const Graph> graph,
                                         const RunnerConfig& config);

/// Starts making unit `index` of `device` ready on a thread of its own (the registry's warm_up:
/// for "cuda", the GPU's context) and returns it, joined when the handle goes: a caller holds it
/// while it reads the models that will run there. An empty handle for "cpu", a device this
/// Redwood lacks, or one with nothing to start.
std::jthread warm_up_device(const std::string& device, int index);

}  // namespace redwood
