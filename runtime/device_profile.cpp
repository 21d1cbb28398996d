// Device profiles (runtime/device_profile.hpp): the profilers' registry, the in-process memo and
// the cache files.
//
// A cache file is trusted only when it parses, has this format, names this device and carries the
// key computed now; anything else is logged and measured again, and the new profile replaces it.
// Files are written to a temporary name and renamed over the old one (core/cache_dir.hpp), so a
// reader (another process starting at the same time) sees the old profile or the new one, never
// half of one.

#include "runtime/device_profile.hpp"

#include "core/cache_dir.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/model_runner.hpp"
#include "runtime/cpu_profile.hpp"
#include "runtime/runner_roundtrip.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>

namespace redwood::runtime {
namespace fs = std::filesystem;
namespace {

// Raised whenever what a figure means or how it is measured changes: older files then stop
// matching their key.
constexpr int kFormat = 2;

struct Registered {
  DeviceProfiler measure;
  DeviceKeyFn key;
};

// Function-local statics: backends register from static initializers, in any order.
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, Registered>& registry() {
  static std::map<std::string, Registered> r;
  return r;
}

struct DeviceName {
  std::string kind;
  int index = 0;
};

DeviceName parse_device(const std::string& device) {
  if (device == "cpu") return {"cpu", 0};
  const auto colon = device.find(':');
  const std::string digits = colon == std::string::npos ? std::string() : device.substr(colon + 1);
  RW_EXPECTS(colon != std::string::npos && colon > 0 && !digits.empty() && digits.size() <= 4 &&
                 digits.find_first_not_of("0123456789") == std::string::npos && device.substr(0, colon) != "cpu",
             InvalidArgument, "device '{}': expected \"cpu\" or KIND:INDEX, e.g. \"cuda:0\"", device);
  return {device.substr(0, colon), std::stoi(digits)};
}

// The device's runner round trip where this process has a runner of its kind (the CPU's always;
// an accelerator's where its backend registered one that is usable here), else 0. A runner that
// fails to run the probe leaves the profile without it, logged: the other figures stand.
double runner_roundtrip(const std::string& device, const DeviceName& name, bool quick) {
  if (name.kind != "cpu") {
    const auto& runners = device_runner_registry();
    const auto it = runners.find(name.kind);
    if (it == runners.end() || !it->second.make || (it->second.unavailable && !it->second.unavailable().empty())) return 0;
  }
  try {
    return measure_runner_roundtrip(name.kind, name.index, quick ? 10 : 40);
  } catch (const std::exception& e) {
    log().warn("device profile: the runner round trip of {} not measured ({}); a split's hand-over is then taken as 0 "
               "until a run measures it", device, e.what());
    return 0;
  }
}

std::string full_key(const std::string& device_key, bool quick) {
  return fmt::format("{}; Redwood {}; profile format {}{}", device_key, redwood_version(), kFormat,
                     quick ? "; quick" : "");
}

/// FNV-1a: stable across runs and builds (std::hash is not), which a file name needs.
std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

/// Throws InvalidArgument when a figure cannot be a measurement.
void check_figures(const DeviceProfile& p) {
  auto check = [&](const char* field, double v) {
    RW_EXPECTS(std::isfinite(v) && v >= 0, InvalidArgument, "device profile of '{}': {} is {}", p.device, field, v);
  };
  RW_EXPECTS(!p.peak_gflops.empty(), InvalidArgument, "device profile of '{}': no peak_gflops", p.device);
  for (const auto& [precision, v] : p.peak_gflops) {
    RW_EXPECTS(std::isfinite(v) && v > 0, InvalidArgument, "device profile of '{}': peak_gflops.{} is {}", p.device,
               precision, v);
  }
  RW_EXPECTS(p.memory_gbps > 0 && std::isfinite(p.memory_gbps), InvalidArgument,
             "device profile of '{}': memory_gbps is {}", p.device, p.memory_gbps);
  check("launch_ms", p.launch_ms);
  check("h2d_pinned_gbps", p.h2d_pinned_gbps);
  check("d2h_pinned_gbps", p.d2h_pinned_gbps);
  check("h2d_pageable_gbps", p.h2d_pageable_gbps);
  check("d2h_pageable_gbps", p.d2h_pageable_gbps);
  check("copy_latency_ms", p.copy_latency_ms);
  check("graph_launch_ms", p.graph_launch_ms);
  check("runner_roundtrip_ms", p.runner_roundtrip_ms);
  check("measure_seconds", p.measure_seconds);
  check("others_cpu_share", p.others_cpu_share);
  RW_EXPECTS(p.cores > 0, InvalidArgument, "device profile of '{}': cores is {}", p.device, p.cores);
}

std::optional<DeviceProfile> read_cached(const fs::path& path, const std::string& device, const std::string& key) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    log().debug("device profile: no {} yet", path.string());
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) {
    log().warn("device profile: cannot read {}; measuring {} again", path.string(), device);
    return std::nullopt;
  }
  try {
    DeviceProfile p = profile_from_json(text.str());
    if (p.device == device && p.key == key) return p;
    log().warn("device profile: {} holds '{}' under key '{}', not '{}' under '{}'; measuring again", path.string(),
               p.device, p.key, device, key);
  } catch (const InvalidArgument& e) {
    log().warn("device profile: ignoring the corrupt {} ({}); measuring {} again", path.string(), e.what(), device);
  }
  return std::nullopt;
}

void write_cached(const fs::path& path, const DeviceProfile& p) {
  try {
    write_file_atomically(path, profile_to_json(p) + "\n");
    log().debug("device profile: saved {}", path.string());
  } catch (const Error& e) {
    log().warn("device profile: cannot save it ({}); {} will be measured again in the next process", e.what(),
               p.device);
  }
}

}  // namespace

bool register_device_profiler(const std::string& kind, DeviceProfiler profiler, DeviceKeyFn key) {
  RW_EXPECTS(kind != "cpu" && !kind.empty() && kind.find(':') == std::string::npos, InvalidArgument,
             "register_device_profiler: '{}' cannot be a device kind (the CPU's profiler is built in)", kind);
  std::lock_guard lock(registry_mutex());
  registry()[kind] = Registered{std::move(profiler), std::move(key)};
  return true;
}

fs::path profile_path(const fs::path& cache_dir, const std::string& device, const std::string& key) {
  std::string name = device;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  }
  return cache_dir / "profiles" / fmt::format("{}-{:016x}.json", name, fnv1a(key));
}

// One list of the members for both directions; from_json wants every one of them.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(DeviceProfile, device, name, peak_gflops, memory_gbps, launch_ms, h2d_pinned_gbps,
                                   d2h_pinned_gbps, h2d_pageable_gbps, d2h_pageable_gbps, copy_latency_ms,
                                   graph_launch_ms, runner_roundtrip_ms, cores, isa, key, peak_method, measured_at,
                                   measure_seconds, others_cpu_share)

std::string profile_to_json(const DeviceProfile& p) {
  nlohmann::json j = p;
  j["format"] = kFormat;
  return j.dump(2);
}

DeviceProfile profile_from_json(const std::string& text) {
  DeviceProfile p;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    const int format = j.at("format").get<int>();
    RW_EXPECTS(format == kFormat, InvalidArgument, "device profile: format {}, this Redwood reads format {}", format,
               kFormat);
    j.get_to(p);
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(fmt::format("device profile: {}", e.what()));
  }
  check_figures(p);
  return p;
}

std::string device_profile_key(const std::string& device) {
  const DeviceName name = parse_device(device);
  if (name.kind == "cpu") return full_key(cpu_profile_key(), false);
  DeviceKeyFn key;
  {
    std::lock_guard lock(registry_mutex());
    const auto it = registry().find(name.kind);
    if (it != registry().end()) key = it->second.key;
  }
  return key ? full_key(key(name.index), false) : std::string();
}

DeviceProfile device_profile(const std::string& device, bool remeasure) {
  ProfileOptions options;
  options.remeasure = remeasure;
  return device_profile(device, options);
}

DeviceProfile device_profile(const std::string& device, const ProfileOptions& options) {
  const DeviceName name = parse_device(device);
  Registered profiler;
  if (name.kind != "cpu") {
    std::lock_guard lock(registry_mutex());
    const auto it = registry().find(name.kind);
    if (it == registry().end()) {
      std::string kinds = "cpu";
      for (const auto& [kind, unused] : registry()) kinds += ", " + kind;
      throw Unsupported(fmt::format(
          "device profile of '{}': no profiler for '{}' devices in this program (it has: {}){}", device, name.kind,
          kinds,
          name.kind == "cuda" ? "; it was built without CUDA, or linked without backend_cuda (redwood_link_registered)"
                              : ""));
    }
    profiler = it->second;
  }
  const bool quick = options.quick && name.kind == "cpu";  // the profilers of other kinds have one length
  const fs::path dir = options.cache_dir.empty() ? cache_dir() : options.cache_dir;

  // One lock over the memo and every measurement: two measurements at once would disturb each
  // other's figures, and a second caller of the same device waits for the first one's result.
  static std::mutex mutex;
  static std::map<std::string, DeviceProfile> memo;
  std::lock_guard lock(mutex);
  const std::string memo_key = fmt::format("{}\n{}\n{}", dir.string(), device, quick);
  if (const auto it = memo.find(memo_key); it != memo.end() && !options.remeasure) return it->second;

  std::string key;
  if (name.kind == "cpu") key = full_key(cpu_profile_key(), quick);
  else if (profiler.key) key = full_key(profiler.key(name.index), false);
  const fs::path path = key.empty() ? fs::path() : profile_path(dir, device, key);
  if (!path.empty() && !options.remeasure) {
    if (std::optional<DeviceProfile> cached = read_cached(path, device, key)) return memo[memo_key] = *cached;
  }
  log().info("device profile: measuring {}{}", device,
             path.empty() ? "" : fmt::format(" (about a second, once: the profile is cached in {})", path.string()));
  const auto start = std::chrono::steady_clock::now();
  DeviceProfile p = name.kind == "cpu" ? measure_cpu_profile(quick) : profiler.measure(name.index);
  p.runner_roundtrip_ms = runner_roundtrip(device, name, quick);
  p.device = device;
  p.key = key;
  p.measured_at = utc_now();
  p.measure_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  check_figures(p);
  if (p.others_cpu_share > kMaxOthersCpuShare) {
    log().warn("device profile: other processes took {:.0f}% of the CPU while {} was measured, so its figures may "
               "be low; not saved (the next process measures again)", 100 * p.others_cpu_share, device);
  } else if (!path.empty()) {
    write_cached(path, p);
  }
  return memo[memo_key] = p;
}

}  // namespace redwood::runtime
