// redwood probe: what this machine offers Redwood (CPU threads, CUDA devices, registered kernels).

#include "apps/redwood/commands.hpp"
#include "core/op_registry.hpp"

#ifdef REDWOOD_HAVE_CUDA
#include "backends/cuda/device_probe.hpp"
#endif

#include <fmt/format.h>

#include <cstdlib>
#include <oneapi/tbb/info.h>

namespace redwood::app {

Command make_probe_command() {
  Command c;
  c.attach_fn = [](CLI::App& app) {
    return app.add_subcommand("probe", "List the CPU threads, CUDA devices and kernels Redwood can use");
  };
  c.run = [] {
    fmt::print("cpu: {} threads (oneTBB default concurrency)\n", oneapi::tbb::info::default_concurrency());
    const char* wait = std::getenv("OMP_WAIT_POLICY");
    fmt::print("openmp (oneDNN): wait policy {}\n", wait != nullptr ? wait : "default (spins, then sleeps)");
    const auto cpu_ops = OpRegistry::instance().ops(Device::kCpu);
    fmt::print("cpu kernels: {} ops: {}\n", cpu_ops.size(), fmt::join(cpu_ops, " "));
#ifdef REDWOOD_HAVE_CUDA
    const cuda::ProbeResult probe = cuda::probe_devices();
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
    return 0;
  };
  return c;
}

}  // namespace redwood::app
