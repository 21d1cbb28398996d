// redwood probe: what this machine offers Redwood (CPU threads, CUDA devices, registered kernels),
// then each device's profile (runtime/device_profile.hpp): measured on first use, about a second
// a device, and read from the cache afterwards.
//
//   redwood probe [--remeasure] [--json]
//
// --json prints only the profiles, as one JSON object: {"profiles": [...], "errors": [...]}, each
// profile as the cache stores it, each error {"device", "error"}.

#include "apps/redwood/commands.hpp"
#include "core/cache_dir.hpp"
#include "core/error.hpp"
#include "core/op_registry.hpp"
#include "runtime/device_profile.hpp"
#include "redwood/config.hpp"

#if REDWOOD_HAVE_CUDA
#include "backends/cuda/device.hpp"
#include "backends/cuda/device_probe.hpp"
#endif

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <oneapi/tbb/info.h>
#include <string>
#include <vector>

namespace redwood::app {
namespace {

struct ProbeArgs {
  bool remeasure = false;
  bool json = false;
};

/// The devices to profile: the CPU, then every usable CUDA device; why there is none is printed
/// with the machine's description.
std::vector<std::string> profiled_devices() {
  std::vector<std::string> devices{"cpu"};
#if REDWOOD_HAVE_CUDA
  for (const auto& d : cuda::cuda_devices().devices) devices.push_back(fmt::format("cuda:{}", d.index));
#endif
  return devices;
}

void print_machine() {
  fmt::print("cpu: {} threads (oneTBB default concurrency)\n", oneapi::tbb::info::default_concurrency());
  const char* wait = std::getenv("OMP_WAIT_POLICY");
  fmt::print("openmp (oneDNN): wait policy {}\n", wait != nullptr ? wait : "default (spins, then sleeps)");
  const auto cpu_ops = OpRegistry::instance().ops(Device::kCpu);
  fmt::print("cpu kernels: {} ops: {}\n", cpu_ops.size(), fmt::join(cpu_ops, " "));
#if REDWOOD_HAVE_CUDA
  const cuda::ProbeResult& probe = cuda::cuda_devices();
  fmt::print("cuda: runtime {}, driver {}\n", probe.runtime_version, probe.driver_version);
  // Registered by backend_cuda's static initializers (a whole-archive link): empty means the
  // launcher was linked without redwood_link_registered().
  const auto cuda_ops = OpRegistry::instance().ops(Device::kCuda);
  fmt::print("cuda kernels: {} ops: {}\n", cuda_ops.size(), fmt::join(cuda_ops, " "));
  if (probe.devices.empty()) fmt::print("cuda: no usable device ({})\n", probe.error);
  for (const auto& d : probe.devices) {
    fmt::print("cuda:{} {} sm_{}{}, {} SMs, {:.1f} GiB, {:.0f} GB/s peak\n", d.index, d.name,
               d.compute_major, d.compute_minor, d.multiprocessors,
               static_cast<double>(d.total_memory) / (1 << 30), d.peak_bandwidth() / 1e9);
  }
#else
  fmt::print("cuda: not built (no CUDA toolkit at configure time)\n");
#endif
}

void print_profile(const runtime::DeviceProfile& p) {
  const bool accelerator = p.device != "cpu";
  fmt::print("\nprofile {}: {}, {} {}, {}\n", p.device, p.name, p.cores, accelerator ? "SMs" : "threads", p.isa);
  std::string peaks;
  for (const auto& [precision, gflops] : p.peak_gflops) peaks += fmt::format("  {} {:.0f}", precision, gflops);
  fmt::print("  peak GFLOPS  {}\n", peaks.substr(2));
  fmt::print("  memory       {:.1f} GB/s (a copy: bytes read + written)\n", p.memory_gbps);
  if (accelerator) {
    fmt::print("  host->device {:.1f} GB/s pinned, {:.1f} GB/s pageable\n", p.h2d_pinned_gbps, p.h2d_pageable_gbps);
    fmt::print("  device->host {:.1f} GB/s pinned, {:.1f} GB/s pageable\n", p.d2h_pinned_gbps, p.d2h_pageable_gbps);
    fmt::print("  copy latency {:.1f} us (4 KiB, pinned)\n", p.copy_latency_ms * 1e3);
    fmt::print("  launch       {:.2f} us a kernel on a stream, {:.2f} us in a CUDA graph\n", p.launch_ms * 1e3,
               p.graph_launch_ms * 1e3);
  } else {
    fmt::print("  launch       {:.2f} us an op\n", p.launch_ms * 1e3);
  }
  fmt::print("  runner       {:.1f} us a batch beyond its copies and compute (a one-node model's round trip; a split's "
             "hand-over a segment until a run measures one)\n",
             p.runner_roundtrip_ms * 1e3);
  fmt::print("  how          {}\n", p.peak_method);
  const std::filesystem::path file = runtime::profile_path(cache_dir(), p.device, p.key);
  std::error_code ec;
  fmt::print("  measured     {} in {:.2f} s{}{}\n", p.measured_at, p.measure_seconds,
             p.others_cpu_share > 0.05 ? fmt::format(", other processes busy {:.0f}%", 100 * p.others_cpu_share) : "",
             std::filesystem::exists(file, ec) ? "; cached in " + file.string() : "; not cached");
}

int run_probe(const ProbeArgs& args) {
  if (!args.json) print_machine();
  nlohmann::json profiles = nlohmann::json::array(), errors = nlohmann::json::array();
  for (const std::string& device : profiled_devices()) {
    try {
      const runtime::DeviceProfile p = runtime::device_profile(device, args.remeasure);
      if (args.json) profiles.push_back(nlohmann::json::parse(runtime::profile_to_json(p)));
      else print_profile(p);
    } catch (const Error& e) {
      // One device that cannot be measured does not hide the others; the exit code tells.
      if (!args.json) fmt::print("\nprofile {}: failed: {}\n", device, e.what());
      errors.push_back({{"device", device}, {"error", e.what()}});
    }
  }
  if (args.json) fmt::print("{}\n", nlohmann::json{{"profiles", profiles}, {"errors", errors}}.dump(2));
  return errors.empty() ? 0 : 1;
}

}  // namespace

Command make_probe_command() {
  auto args = std::make_shared<ProbeArgs>();
  Command c;
  c.attach_fn = [args](CLI::App& app) {
    CLI::App* sub = app.add_subcommand("probe", "List the CPU threads, CUDA devices and kernels Redwood can use, and "
                                                "each device's measured profile");
    sub->add_flag("--remeasure", args->remeasure, "Measure the device profiles again (and replace the cached ones)");
    sub->add_flag("--json", args->json, "Print only the device profiles, as JSON");
    return sub;
  };
  c.run = [args] { return run_probe(*args); };
  return c;
}

}  // namespace redwood::app
