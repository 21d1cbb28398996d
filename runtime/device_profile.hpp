#pragma once
// Device profiles: what a device of this machine reaches, measured, for the cost model's roofline
// estimates (max(flops / peak, bytes / bandwidth) + launch) and its transfer costs
// (latency + bytes / host<->device bandwidth). docs/planner.md, "Device profiles".
//
//   device_profile("cuda:0")
//     memo (this process) ──hit──► profile
//       │ miss
//     cache file <cache dir>/profiles/cuda_0-<hash of key>.json ──same key──► profile
//       │ absent, corrupt, or another key (logged)
//     measure: "cpu" here (runtime/cpu_profile.cpp); other kinds through the profiler their
//     backend registered ("cuda": backends/cuda/device_profiler.cu) ──► saved (temp + rename)
//
// The key names what the figures depend on (CPU model and thread count, GPU model and driver,
// Redwood's version and the profile format); a profile is trusted only under its own key, so a
// new driver or another thread count measures again. Measuring takes about a second per device.
//
// This header is kept to C++17 and the standard library: backends/cuda's .cu files include it.

#include <filesystem>
#include <functional>
#include <map>
#include <string>

namespace redwood::runtime {

/// What one device reaches. Rates are measured (see peak_method); an accelerator's host<->device
/// figures are 0 for the CPU.
struct DeviceProfile {
  std::string device;          // "cpu", "cuda:0"
  std::string name;            // CPU model name / "NVIDIA H200"
  std::map<std::string, double> peak_gflops;  // measured, by precision: "fp32", "fp16", "bf16", "tf32" (what the device has)
  double memory_gbps = 0;      // measured device-memory (or host RAM for the CPU) copy bandwidth, GB/s = 1e9 B/s,
                               // counting the bytes read and the bytes written
  double launch_ms = 0;        // fixed cost per kernel / per op dispatch
  // accelerators: host<->device, measured
  double h2d_pinned_gbps = 0, d2h_pinned_gbps = 0, h2d_pageable_gbps = 0, d2h_pageable_gbps = 0;
  double copy_latency_ms = 0;  // a small (4 KiB) pinned copy's time
  double graph_launch_ms = 0;  // accelerators: per kernel node of a replayed CUDA graph (0 for the CPU)
  /// What a batch spends in one of the device's model runners beyond its copies and compute
  /// (submit, the wake of the thread that runs it or notices its end, its completion's call),
  /// measured with a one-node model (runtime/runner_roundtrip.hpp); 0 for a kind without a runner
  /// here. A split's hand-over a segment before any batch of one measured it on this machine.
  double runner_roundtrip_ms = 0;
  int cores = 0;               // CPU: hardware threads Redwood uses (oneTBB default concurrency); GPU: SMs
  std::string isa;             // CPU: "avx512f avx512_bf16 amx..." / "avx2 fma"; GPU: "sm_90"
  std::string key;             // what identifies the machine/device for the cache (model name, driver, Redwood version)
  std::string peak_method;     // how peak_gflops and launch_ms were measured, in words
  std::string measured_at;     // ISO-8601 UTC
  double measure_seconds = 0;  // how long the measurement took
  double others_cpu_share = 0; // CPU: the share of all cores' time other processes (or, in a VM, the host)
                               // took while it was measured; above kMaxOthersCpuShare it is not cached
};

/// A CPU profile measured while other processes took more than this share of the cores is kept
/// for the process but not saved: its figures may be low, and the next process measures again.
inline constexpr double kMaxOthersCpuShare = 0.25;

struct ProfileOptions {
  /// Measure even when the cache holds the profile (and replace it there).
  bool remeasure = false;
  /// Smaller problems and fewer repeats for the CPU (about 10x faster, figures less precise), for
  /// tests. A quick profile has its own key, so it never stands in for a full one.
  bool quick = false;
  /// Where profiles/ lives; empty: redwood::cache_dir() ($REDWOOD_CACHE_DIR, else
  /// $XDG_CACHE_HOME/redwood, else $HOME/.cache/redwood; core/cache_dir.hpp).
  std::filesystem::path cache_dir;
};

/// The profile of `device` ("cpu", "cuda:N"): from the cache when its key matches, else measured now and saved.
/// Thread-safe; measurements never overlap (they would disturb each other). Throws InvalidArgument
/// for a malformed device name, Unsupported for a kind no profiler is registered for (a program
/// built without CUDA, or linked without backend_cuda), and what the profiler throws (a missing GPU).
/// An unwritable cache is a warning; the profile is still returned.
DeviceProfile device_profile(const std::string& device, bool remeasure = false);
DeviceProfile device_profile(const std::string& device, const ProfileOptions& options);

/// What identifies `device`'s profile ("cpu", "cuda:0": the machine's CPU model, the GPU and its
/// driver, Redwood's version), computed without measuring; "" for a kind whose profiler has no key
/// function or that has no profiler. Throws what the key function throws (a missing GPU).
std::string device_profile_key(const std::string& device);

/// Measures device `index` of one kind ("cuda").
using DeviceProfiler = std::function<DeviceProfile(int index)>;
/// The cache key of device `index`, cheap to compute (no measurement); throws when the device is
/// missing.
using DeviceKeyFn = std::function<std::string(int index)>;
/// Registers the profiler of a device kind (a backend's static initializer does this). Without a
/// key function its profiles are measured once per process and never cached. Returns true (for
/// use in an initializer); a second registration of a kind replaces the first.
bool register_device_profiler(const std::string& kind, DeviceProfiler profiler, DeviceKeyFn key = {});

/// The file that holds `device`'s profile under `key` in `cache_dir`.
std::filesystem::path profile_path(const std::filesystem::path& cache_dir, const std::string& device,
                                   const std::string& key);

/// The profile as the cache stores it (a JSON object with a "format" member).
std::string profile_to_json(const DeviceProfile& profile);
/// Reads profile_to_json's text; throws InvalidArgument naming what is wrong (not JSON, another
/// format, a missing or mistyped member, a figure that is negative or not finite).
DeviceProfile profile_from_json(const std::string& text);

}  // namespace redwood::runtime
