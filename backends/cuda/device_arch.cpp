#include "backends/cuda/device_arch.hpp"

#include <fmt/format.h>

#include <charconv>
#include <vector>

#ifndef REDWOOD_CUDA_ARCHITECTURES
#error "backends/cuda/CMakeLists.txt passes CMAKE_CUDA_ARCHITECTURES as REDWOOD_CUDA_ARCHITECTURES"
#endif

namespace redwood::cuda {
namespace {

// One entry of CMAKE_CUDA_ARCHITECTURES.
struct ArchEntry {
  int major = 0, minor = 0;
  char suffix = 0;  // 'a' (this exact GPU) or 'f' (its family), else 0
  bool sass = true, ptx = true;
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '"')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '"')) s.remove_suffix(1);
  return s;
}

// False when an entry is not a number (all, all-major, native, a typo): the rule cannot tell.
bool parse_architectures(std::string_view list, std::vector<ArchEntry>& out) {
  while (!list.empty()) {
    const std::size_t cut = list.find_first_of(";,");
    std::string_view entry = trim(list.substr(0, cut));
    list = cut == std::string_view::npos ? std::string_view() : list.substr(cut + 1);
    if (entry.empty()) continue;
    ArchEntry e;
    if (entry.ends_with("-real")) {
      e.ptx = false;
      entry.remove_suffix(5);
    } else if (entry.ends_with("-virtual")) {
      e.sass = false;
      entry.remove_suffix(8);
    }
    if (!entry.empty() && (entry.back() == 'a' || entry.back() == 'f')) {
      e.suffix = entry.back();
      entry.remove_suffix(1);
    }
    int number = 0;
    const auto [end, err] = std::from_chars(entry.data(), entry.data() + entry.size(), number);
    if (err != std::errc() || end != entry.data() + entry.size() || number < 10) return false;
    e.major = number / 10;
    e.minor = number % 10;
    out.push_back(e);
  }
  return !out.empty();
}

bool runs_on(const ArchEntry& e, int major, int minor) {
  if (e.suffix == 'a') return major == e.major && minor == e.minor;
  const bool same_family = major == e.major && minor >= e.minor;
  if (e.sass && same_family) return true;
  if (!e.ptx) return false;
  if (e.suffix == 'f') return same_family;
  return major > e.major || same_family;
}

// "sm_80, sm_90, compute_90 (PTX)" for "80-real;90".
std::string describe(std::string_view architectures) {
  std::vector<ArchEntry> entries;
  if (!parse_architectures(architectures, entries)) return std::string(architectures);
  std::string out;
  auto add = [&](const std::string& s) { out += (out.empty() ? "" : ", ") + s; };
  for (const ArchEntry& e : entries) {
    const std::string suffix = e.suffix == 0 ? "" : std::string(1, e.suffix);
    if (e.sass) add(fmt::format("sm_{}{}{}", e.major, e.minor, suffix));
  }
  for (const ArchEntry& e : entries) {
    const std::string suffix = e.suffix == 0 ? "" : std::string(1, e.suffix);
    if (e.ptx) add(fmt::format("compute_{}{}{} (PTX)", e.major, e.minor, suffix));
  }
  return out;
}

}  // namespace

std::string_view built_cuda_architectures() { return REDWOOD_CUDA_ARCHITECTURES; }

ArchFit architecture_fit(std::string_view architectures, int major, int minor) {
  std::vector<ArchEntry> entries;
  if (!parse_architectures(architectures, entries)) return ArchFit::kUnknown;
  for (const ArchEntry& e : entries) {
    if (runs_on(e, major, minor)) return ArchFit::kRuns;
  }
  return ArchFit::kNoCode;
}

std::string architecture_problem(const DeviceInfo& device, std::string_view architectures, KernelImage image) {
  const bool missing = image == KernelImage::kMissing ||
                       (image == KernelImage::kNotAsked &&
                        architecture_fit(architectures, device.compute_major, device.compute_minor) == ArchFit::kNoCode);
  if (!missing) return "";
  return fmt::format(
      "GPU {} ({}) is sm_{}{}, and this Redwood carries CUDA code only for {} (CMAKE_CUDA_ARCHITECTURES={}): "
      "rebuild with -DCMAKE_CUDA_ARCHITECTURES={}{} (or native)",
      device.index, device.name, device.compute_major, device.compute_minor, describe(architectures), architectures,
      device.compute_major, device.compute_minor);
}

std::string architecture_problem(const DeviceInfo& device) {
  return architecture_problem(device, built_cuda_architectures(), probe_kernel_image(device.index));
}

}  // namespace redwood::cuda
