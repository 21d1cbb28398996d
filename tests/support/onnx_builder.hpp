#pragma once
// Builds small ONNX models in tests (with the ONNX library's protobuf classes), so that import,
// executor and launcher tests need no model files.

#include "core/tensor.hpp"

#include <onnx/onnx_pb.h>

#include <filesystem>
#include <string>
#include <vector>

namespace redwood::testing {

class OnnxBuilder {
 public:
  explicit OnnxBuilder(std::int64_t opset = 13);

  /// dims: a value >= 0 is a fixed extent, -1 a symbolic one named by `symbols` in order.
  OnnxBuilder& input(const std::string& name, int onnx_type, const std::vector<std::int64_t>& dims,
                     const std::vector<std::string>& symbols = {});
  /// Outputs need a shape for ONNX's checker; dims as for input() (symbols default to "d0", ...).
  OnnxBuilder& output(const std::string& name, int onnx_type, const std::vector<std::int64_t>& dims,
                      const std::vector<std::string>& symbols = {});
  OnnxBuilder& initializer(const std::string& name, const Tensor& value);
  onnx::NodeProto& node(const std::string& op_type, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name = "");
  static void set_attr(onnx::NodeProto& node, const std::string& key, std::int64_t value);
  static void set_attr(onnx::NodeProto& node, const std::string& key, const std::vector<std::int64_t>& values);
  /// A tensor attribute (a Constant node's value).
  static void set_attr(onnx::NodeProto& node, const std::string& key, const Tensor& value);
  /// A graph attribute (an If's branch): another builder's graph.
  static void set_attr(onnx::NodeProto& node, const std::string& key, const onnx::GraphProto& graph);
  /// `value` as an ONNX tensor named `name`, its bytes in raw_data.
  static onnx::TensorProto tensor_proto(const std::string& name, const Tensor& value);

  onnx::ModelProto& model() { return model_; }
  std::string bytes() const;
  void save(const std::filesystem::path& file) const;

 private:
  onnx::ModelProto model_;
};

/// dir/model.onnx, y = x + w, w four floats stored outside the model in external data at
/// `location` (relative to dir unless absolute), with that offset and length when given.
std::filesystem::path model_with_external(const std::filesystem::path& dir, const std::string& location,
                                          const std::string& offset = "", const std::string& length = "");

/// A fresh, empty temporary folder for one test (removed by the OS's tmp cleaning, not by us).
std::filesystem::path temp_dir(const std::string& tag);

}  // namespace redwood::testing
