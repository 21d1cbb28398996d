#include "stages/preprocess/normalization_keys.hpp"

#include <algorithm>

namespace redwood {

PixelNormalization read_normalization_keys(Params& p) {
  PixelNormalization n;
  n.rgb = p.choice("color", "rgb", {"rgb", "bgr"}) == "rgb";
  n.scale = p.get<float>("scale", n.scale);
  const auto mean = p.get<std::vector<float>>("mean", {0.f, 0.f, 0.f});
  const auto std = p.get<std::vector<float>>("std", {1.f, 1.f, 1.f});
  if (mean.size() != 3) p.fail("mean", "expected three values");
  if (std.size() != 3) p.fail("std", "expected three values");
  for (float s : std) {
    if (s == 0.f) p.fail("std", "values must not be zero");
  }
  std::copy(mean.begin(), mean.end(), n.mean.begin());
  std::copy(std.begin(), std.end(), n.std.begin());
  return n;
}

}  // namespace redwood
