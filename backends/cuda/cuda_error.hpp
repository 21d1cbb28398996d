#pragma once
// The error type of failed CUDA runtime calls (see cuda_check.hpp for the macros that throw it).

#include "core/error.hpp"

namespace redwood::cuda {

class CudaError : public Error {
 public:
  using Error::Error;
};

}  // namespace redwood::cuda
