#pragma once
// What CUDA devices this process can see, as the runtime reports them. Used by `redwood probe`,
// by GPU tests to decide whether to skip, and (later) by the device profile.

#include <string>
#include <vector>

namespace redwood::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int compute_major = 0, compute_minor = 0;
  std::size_t total_memory = 0;
  int multiprocessors = 0;
  int clock_khz = 0;
  int memory_clock_khz = 0;
  int memory_bus_bits = 0;
  /// Theoretical DRAM bandwidth from clock and bus width, bytes per second.
  double peak_bandwidth() const { return 2.0 * memory_clock_khz * 1e3 * memory_bus_bits / 8.0; }
};

struct ProbeResult {
  int driver_version = 0;    // 0 when no driver is loaded
  int runtime_version = 0;
  std::string error;         // why no device is usable, when devices is empty
  std::vector<DeviceInfo> devices;
};

/// Asks the CUDA runtime for its devices; never throws (a missing driver is a result, not an error).
ProbeResult probe_devices();

}  // namespace redwood::cuda
