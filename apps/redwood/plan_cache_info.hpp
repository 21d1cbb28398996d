#pragma once
// `redwood plan --cache-info [MODEL]`: what the plan cache (runtime/plan_cache.hpp) holds.

#include <string>

namespace redwood::app {

/// Prints the plan cache's folder and each entry in it (file, model and its hash, device, driver,
/// CUDA runtime, Redwood version, options, picks, size, when written), and for an entry that is
/// not usable, why. Given a model file, also its hash and, for this machine, whether an entry
/// exists and is valid (every pick checked against the kernels here; that needs a CUDA build and
/// a GPU, else the entries are matched by model alone and the reason is printed). Returns 0;
/// throws redwood::Error when the model cannot be loaded.
int print_plan_cache_info(const std::string& model_or_empty);

}  // namespace redwood::app
