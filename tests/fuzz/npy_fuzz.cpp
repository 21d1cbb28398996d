// Fuzz target: .npy files (core/npy.hpp), as `redwood infer --input NAME=FILE.npy` and
// `redwood bench --input` read them: magic, version, header length, the header dict (descr,
// fortran_order, shape), the element count and the data behind it.

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/npy.hpp"
#include "fuzz/fuzz_target.hpp"

#include <string>

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  redwood::set_log_level("off");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const redwood::Tensor t = redwood::read_npy_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz.npy");
    // What infer does next with a tensor: describe it and read every element.
    (void)t.description();
    if (t.dtype() != redwood::DType::kUndefined && t.numel() <= 4096) (void)t.to_float_vector();
  } catch (const redwood::Error&) {
  }
  return 0;
}
