#pragma once
// A second device for the partitioner's tests on a machine without a GPU: the CPU runner
// registered as device runner "test-accelerator", whose supports() refuses Softmax and whose
// time_nodes() profiles the CPU executor; and device profiles whose figures a test chooses, so
// that placements do not depend on the machine.

#include "core/model_runner.hpp"
#include "core/onnx/onnx_import.hpp"
#include "runtime/cpu_runner.hpp"
#include "runtime/device_profile.hpp"
#include "runtime/executor.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <algorithm>
#include <chrono>
#include <string>

namespace redwood::testing {

/// The stand-in accelerators' supports(): every op but Softmax.
inline std::string all_but_softmax(const Graph&, const Node& node, const std::vector<TensorDesc>&, const std::string&) {
  return node.op_type == "Softmax" ? std::string("Softmax: not on this device") : std::string();
}

/// Registers device runner `name` for a test: usable, one device, supports() all_but_softmax, its
/// runners made by `make`; `time_nodes` may be empty. Returns `name`. Once per name: call it to
/// initialize a function-local static.
inline const char* register_test_accelerator(const char* name, decltype(DeviceRunnerFactory::make) make,
                                             decltype(DeviceRunnerFactory::time_nodes) time_nodes = {}) {
  DeviceRunnerFactory f;
  f.unavailable = [] { return std::string(); };
  f.make = std::move(make);
  f.device_count = [] { return 1; };
  f.supports = all_but_softmax;
  f.time_nodes = std::move(time_nodes);
  register_device_runner(name, std::move(f));
  return name;
}

/// A CPU runner passed through, for a test device whose runner changes what it does or reports:
/// a subclass overrides submit() or stats() and names itself (description()).
class WrappedCpuRunner : public ModelRunner {
 public:
  WrappedCpuRunner(std::shared_ptr<const Graph> graph, const RunnerConfig& config)
      : ModelRunner(*graph), inner_(make_cpu_runner(std::move(graph), config)) {}
  void submit(InferBatch batch, InferDone done) override { inner_->submit(std::move(batch), std::move(done)); }
  void prepare(const std::vector<Shape>& shapes) override { inner_->prepare(shapes); }
  void drain() override { inner_->drain(); }
  int in_flight() const override { return inner_->in_flight(); }
  RunnerStats stats() const override { return inner_->stats(); }

 protected:
  std::unique_ptr<ModelRunner> inner_;
};

/// Registers device runner `name` (as register_test_accelerator) whose runners are `Runner`s, a
/// WrappedCpuRunner subclass made from the segment's graph and config. Returns `name`.
template <class Runner>
const char* register_wrapped_accelerator(const char* name) {
  return register_test_accelerator(
      name, [](std::shared_ptr<const Graph> graph, const RunnerConfig& config) -> std::unique_ptr<ModelRunner> {
        return std::make_unique<Runner>(std::move(graph), config);
      });
}

/// The device's name; registered on the first call.
inline const char* stand_in_accelerator() {
  static const char* const name = register_test_accelerator(
    "test-accelerator",
    [](std::shared_ptr<const Graph> graph, const RunnerConfig& config) { return make_cpu_runner(graph, config); },
    [](std::shared_ptr<const Graph> graph, const std::vector<Shape>& shapes, const RunnerConfig&, int runs) {
      std::map<std::string, Tensor> feeds;
      for (std::size_t i = 0; i < graph->inputs.size() && i < shapes.size(); ++i) {
        feeds[graph->inputs[i].name] = Tensor::zeros(graph->inputs[i].dtype, shapes[i]);
      }
      Executor executor(graph);
      executor.run(feeds);
      executor.set_profiling(true);
      NodeTimes times;
      std::vector<double> whole;
      for (int r = 0; r < runs; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        executor.run(feeds);
        whole.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        for (const NodeTiming& t : executor.last_timings()) times.by_node[t.node] += t.milliseconds / runs;
      }
      std::sort(whole.begin(), whole.end());
      times.whole_ms = whole[whole.size() / 2];
      return times;
    });
  return name;
}

/// A profile computing `gflops` (fp32) and moving `gbps`, with copies over a 20 GB/s link.
inline runtime::DeviceProfile stand_in_profile(const std::string& device, double gflops, double gbps) {
  runtime::DeviceProfile p;
  p.device = device;
  p.name = device;
  p.peak_gflops["fp32"] = gflops;
  p.memory_gbps = gbps;
  p.launch_ms = 0.001;
  p.h2d_pageable_gbps = p.d2h_pageable_gbps = 20;
  p.copy_latency_ms = 0.001;
  return p;
}

/// x [N,16,32,32] -> conv -> Softmax over channels -> conv -> y: the stand-in accelerators refuse
/// the Softmax, so the model runs whole on the CPU or split around it.
inline std::shared_ptr<const Graph> softmax_between_convs_model() {
  const auto dir = temp_dir("softmax-between-convs");
  OnnxBuilder b(13);
  b.input("x", onnx::TensorProto::FLOAT, {-1, 16, 32, 32}, {"N"});
  b.initializer("w1", random_tensor(DType::kF32, {16, 16, 3, 3}, -0.2, 0.2, 2));
  b.initializer("w2", random_tensor(DType::kF32, {16, 16, 3, 3}, -0.2, 0.2, 3));
  auto& c1 = b.node("Conv", {"x", "w1"}, {"c1"}, "conv1");
  OnnxBuilder::set_attr(c1, "pads", std::vector<std::int64_t>{1, 1, 1, 1});
  auto& sm = b.node("Softmax", {"c1"}, {"p"}, "softmax");
  OnnxBuilder::set_attr(sm, "axis", std::int64_t{1});
  auto& c2 = b.node("Conv", {"p", "w2"}, {"y"}, "conv2");
  OnnxBuilder::set_attr(c2, "pads", std::vector<std::int64_t>{1, 1, 1, 1});
  b.output("y", onnx::TensorProto::FLOAT, {-1, 16, 32, 32}, {"N"});
  b.save(dir / "s.onnx");
  return load_onnx(dir / "s.onnx");
}

}  // namespace redwood::testing
