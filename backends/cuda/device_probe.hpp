#pragma once
// What CUDA devices this process can see, as the runtime reports them: the one interrogation of
// the driver, whose answer backends/cuda/device.hpp keeps for the process.

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
  /// Programmatic dependent launch: compute capability 9.0 and newer.
  bool has_pdl() const { return compute_major >= 9; }
  /// wgmma (sm_90a code, which runs on exactly compute capability 9.0).
  bool has_wgmma() const { return compute_major == 9 && compute_minor == 0; }
};

struct ProbeResult {
  int driver_version = 0;    // 0 when no driver is loaded
  int runtime_version = 0;
  std::string error;         // why no device is usable, when devices is empty
  std::vector<DeviceInfo> devices;
};

/// Asks the CUDA runtime for its devices; never throws (a missing driver is a result, not an error).
/// The driver is asked here and nowhere else; the rest of Redwood reads the answer kept by
/// cuda_devices() (backends/cuda/device.hpp).
ProbeResult probe_devices();

}  // namespace redwood::cuda
