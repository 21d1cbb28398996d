#pragma once
// One-line summaries of output tensors for `redwood infer`: shape, range, mean, and what a
// probability map shows (regions above a threshold), so that a text-detection model's output says
// how many text regions it found.

#include "core/tensor.hpp"

#include <string>

namespace redwood::app {

/// "float[1, 1, 576, 768] min 0 max 0.998 mean 0.0213; 41 regions above 0.3 (2.9% of pixels)".
std::string summarize_tensor(const Tensor& t);

}  // namespace redwood::app
