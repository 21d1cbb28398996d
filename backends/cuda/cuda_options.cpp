// The CUDA backend's switches by name (cuda_options.hpp).

#include "backends/cuda/cuda_options.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <array>

namespace redwood::cuda {
namespace {

constexpr std::array<CudaOptionField, 9> kFields = {{
    {"wgmma", &CudaOptions::wgmma, "rw.ConvNhwc's Hopper wgmma tiles (plain and TMA-fed) among the tuner's candidates"},
    {"tma", &CudaOptions::tma, "the TMA-fed wgmma tiles among them"},
    {"narrow_conv", &CudaOptions::narrow_conv, "rw.ConvNhwc's narrow kernel for layers of few channels"},
    {"depthwise_tuning", &CudaOptions::depthwise_tuning, "rw.DepthwiseConvNhwc times its variants (off: its default)"},
    {"gap_split", &CudaOptions::gap_split, "rw.GlobalAveragePoolNhwc splits images over blocks to fill the GPU"},
    {"pdl", &CudaOptions::pdl, "programmatic dependent launch where the GPU and driver take it"},
    {"space_to_depth_stem", &CudaOptions::space_to_depth_stem,
     "a few-channel stride-2 stem convolution runs over the image's 2x2 space-to-depth"},
    {"fuse_conv_shortcuts", &CudaOptions::fuse_conv_shortcuts,
     "a 1x1 projection shortcut runs inside the convolution whose residual it is"},
    {"blocking_completion", &CudaOptions::blocking_completion,
     "a runner's completion thread sleeps until a batch ends (off: it polls, a core busy meanwhile)", false},
}};

std::string known_names() {
  std::string out;
  for (const CudaOptionField& f : kFields) out += (out.empty() ? "" : ", ") + std::string(f.name);
  return out;
}

bool parse_switch(std::string_view name, std::string_view value) {
  if (value == "on" || value == "true" || value == "1") return true;
  if (value == "off" || value == "false" || value == "0") return false;
  throw InvalidArgument(
      fmt::format("CUDA option '{}': '{}' is not a switch value (on, off, true, false, 1, 0)", name, value));
}

}  // namespace

std::span<const CudaOptionField> cuda_option_fields() { return kFields; }

const CudaOptionField* find_cuda_option(std::string_view name) {
  for (const CudaOptionField& f : kFields) {
    if (name == f.name) return &f;
  }
  return nullptr;
}

void set_cuda_option(CudaOptions& options, std::string_view name, std::string_view value) {
  if (const CudaOptionField* f = find_cuda_option(name)) {
    options.*f->member = parse_switch(name, value);
    return;
  }
  throw InvalidArgument(fmt::format("unknown CUDA option '{}' (known: {})", name, known_names()));
}

void set_cuda_option(CudaOptions& options, std::string_view assignment) {
  const std::size_t eq = assignment.find('=');
  if (eq == std::string_view::npos) {
    throw InvalidArgument(fmt::format("CUDA option '{}': expected name=value, e.g. wgmma=off (known: {})",
                                      assignment, known_names()));
  }
  set_cuda_option(options, assignment.substr(0, eq), assignment.substr(eq + 1));
}

CudaOptions cuda_options_from(const std::map<std::string, std::string>& values) {
  CudaOptions options;
  for (const auto& [name, value] : values) set_cuda_option(options, name, value);
  return options;
}

std::map<std::string, std::string> cuda_plan_option_values(const CudaOptions& options) {
  std::map<std::string, std::string> out;
  for (const CudaOptionField& f : kFields) {
    if (f.changes_plan) out[f.name] = options.*f.member ? "on" : "off";
  }
  return out;
}

std::string describe(const CudaOptions& options) {
  const CudaOptions defaults;
  std::string out;
  for (const CudaOptionField& f : kFields) {
    if (options.*f.member != defaults.*f.member) {
      out += fmt::format("{}{}={}", out.empty() ? "" : " ", f.name, options.*f.member ? "on" : "off");
    }
  }
  return out.empty() ? "defaults" : out;
}

}  // namespace redwood::cuda
