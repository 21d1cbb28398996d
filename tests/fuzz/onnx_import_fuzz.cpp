// Fuzz target: ONNX models, as `redwood infer|plan|bench MODEL` and a pipeline's `models:` load
// them: load_onnx_bytes (protobuf parse, ONNX's checker and shape inference, Redwood's IR:
// initializers, Constant nodes, attributes, value infos, the topological sort), then what an
// Executor does at construction: the optimizer's passes (constant folding runs the reference
// kernels on the model's constants), per-shape folding's search, and a kernel for every node from
// the registered providers (oneDNN, then reference), which checks attributes and dtypes.
//
// The model is named as if it lived in a folder that does not exist, so that external data can
// never reach a real file: the loader refuses it (IoError) like any missing file.

#include "core/error.hpp"
#include "runtime/executor.hpp"
#include "core/log.hpp"
#include "core/onnx/onnx_import.hpp"
#include "fuzz/fuzz_target.hpp"

#include <string>

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  redwood::set_log_level("off");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto graph = redwood::load_onnx_bytes(std::string(reinterpret_cast<const char*>(data), size),
                                                "/nonexistent/redwood-fuzz/model.onnx");
    redwood::Executor executor(graph);
  } catch (const redwood::Error&) {
  }
  return 0;
}
