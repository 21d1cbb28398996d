#pragma once
// ONNX import: parse a model with the ONNX library (protobuf), run ONNX's checker and shape
// inference, and build Redwood's IR. Every problem is reported with the file and, where there is
// one, the node: a truncated or corrupt file, a cycle, an opset newer than the ONNX library knows,
// control flow Redwood does not run (Loop, Scan, an If whose condition is computed at run time),
// an element type Redwood does not hold.
//
// What ONNX Runtime runs loads here too (core/onnx/detail/onnx_proto.hpp): nodes out of
// topological order are sorted, and what ONNX's checker refuses but ONNX Runtime accepts (that
// order, a graph without a name, a graph input without a shape) is logged as a warning. An If
// whose condition is a constant is replaced by the branch it takes. Initializers may keep their
// bytes in external data: files in the model's folder, read at their offsets straight into the
// tensors (models over protobuf's 2 GiB must keep their weights there).

#include "core/graph/graph.hpp"

#include <filesystem>
#include <memory>
#include <string>

namespace redwood {

struct OnnxImportOptions {
  /// Run ONNX's checker (structure, opset, op schemas), lenient where ONNX Runtime is.
  bool check = true;
  /// Run ONNX shape inference so that intermediates get dtypes and (partial) shapes.
  bool infer_shapes = true;
  /// Keep the imported graph in the model cache and read it back when the same bytes are loaded
  /// again (core/onnx/model_cache.hpp). The launcher's commands turn it on.
  bool cache = false;
};

/// Loads an ONNX model file into Redwood's IR (through the model cache when options.cache).
std::shared_ptr<Graph> load_onnx(const std::filesystem::path& file, const OnnxImportOptions& options = {});

/// Loads an ONNX model from serialized bytes; `source` names it in messages.
std::shared_ptr<Graph> load_onnx_bytes(const std::string& bytes, const std::string& source,
                                       const OnnxImportOptions& options = {});

/// Reads a serialized onnx.TensorProto (the input_N.pb / output_N.pb of ONNX's node tests).
Tensor load_onnx_tensor(const std::filesystem::path& file);

}  // namespace redwood
