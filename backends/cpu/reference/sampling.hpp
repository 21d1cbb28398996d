#pragma once
// Helpers shared by the reference kernels that sample a tensor at fractional coordinates
// (Resize, GridSample, RoiAlign): Keys' cubic convolution kernel, and string attributes that
// choose one of a few behaviours.

#include "core/error.hpp"
#include "core/graph/graph.hpp"

#include <fmt/format.h>

#include <cmath>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace redwood::cpu {

/// Keys' cubic convolution kernel at distance d from the sample, with parameter a (-0.75 as
/// ONNX Runtime, PyTorch and OpenCV; -0.5 is Keys' own): the weight of a tap d pixels away,
/// zero from 2 on. Four taps at d = t + 1, t, 1 - t, 2 - t (t in [0, 1]) sum to 1.
inline double keys_cubic(double d, double a) {
  d = std::abs(d);
  if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
  if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  return 0;
}

/// The value of string attribute `name` (or `fallback` when absent) mapped through `choices`;
/// throws Unsupported naming the node, the attribute, its value and the values supported.
template <typename E>
E attr_choice(const Node& node, const char* name, const std::string& fallback,
              std::initializer_list<std::pair<std::string_view, E>> choices) {
  const std::string value = node.attr_string(name, fallback);
  std::string supported;
  for (const auto& [text, choice] : choices) {
    if (value == text) return choice;
    supported += (supported.empty() ? "" : ", ") + std::string(text);
  }
  throw Unsupported(fmt::format("{}: {} '{}' is not supported ({})", node.where(), name, value,
                                supported));
}

}  // namespace redwood::cpu
