#pragma once
// The keys that say how pixels become a model's input values, shared by every stage that makes
// model inputs from pictures (preprocess, crops): `color` (the channel order the model wants),
// `scale` (applied to 0..255 values first), then per channel `mean` and `std`:
// value = (pixel * scale - mean) / std.

#include "stages/params.hpp"

#include <array>

namespace redwood {

struct PixelNormalization {
  bool rgb = true;
  float scale = 1.0f / 255.0f;
  std::array<float, 3> mean{0.f, 0.f, 0.f};
  std::array<float, 3> std{1.f, 1.f, 1.f};
};

/// Reads color, scale, mean and std (three values each; no std of zero) with these defaults:
/// rgb, 1/255, zeros, ones. Mistakes fail at their key.
PixelNormalization read_normalization_keys(Params& p);

}  // namespace redwood
