#pragma once
// A second device for the partitioner's tests on a machine without a GPU: the CPU runner
// registered as device runner "test-accelerator", whose supports() refuses Softmax; and device
// profiles whose figures a test chooses, so that placements do not depend on the machine.

#include "core/model_runner.hpp"
#include "runtime/cpu_runner.hpp"
#include "runtime/device_profile.hpp"

#include <string>

namespace redwood::testing {

/// The device's name; registered on the first call.
inline const char* stand_in_accelerator() {
  static const bool registered = [] {
    DeviceRunnerFactory f;
    f.unavailable = [] { return std::string(); };
    f.make = [](std::shared_ptr<const Graph> graph, const RunnerConfig& config) { return make_cpu_runner(graph, config); };
    f.device_count = [] { return 1; };
    f.supports = [](const Graph&, const Node& node, const std::vector<TensorDesc>&, const std::string&) {
      return node.op_type == "Softmax" ? std::string("Softmax: not on this device") : std::string();
    };
    return register_device_runner("test-accelerator", std::move(f));
  }();
  (void)registered;
  return "test-accelerator";
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

}  // namespace redwood::testing
