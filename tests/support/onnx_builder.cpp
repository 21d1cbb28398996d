#include "support/onnx_builder.hpp"

#include <fstream>
#include <random>
#include <stdexcept>
#include <unistd.h>

namespace redwood::testing {

OnnxBuilder::OnnxBuilder(std::int64_t opset) {
  model_.set_ir_version(8);
  model_.set_producer_name("redwood-tests");
  auto* op = model_.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  model_.mutable_graph()->set_name("test_graph");
}

namespace {
void set_value_info(onnx::ValueInfoProto* vi, const std::string& name, int onnx_type,
                    const std::vector<std::int64_t>& dims, const std::vector<std::string>& symbols) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx_type);
  auto* shape = tt->mutable_shape();
  std::size_t next_symbol = 0;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    auto* dim = shape->add_dim();
    if (dims[i] >= 0) {
      dim->set_dim_value(dims[i]);
    } else {
      dim->set_dim_param(next_symbol < symbols.size() ? symbols[next_symbol++] : "d" + std::to_string(i));
    }
  }
}
}  // namespace

OnnxBuilder& OnnxBuilder::input(const std::string& name, int onnx_type, const std::vector<std::int64_t>& dims,
                                const std::vector<std::string>& symbols) {
  set_value_info(model_.mutable_graph()->add_input(), name, onnx_type, dims, symbols);
  return *this;
}

OnnxBuilder& OnnxBuilder::output(const std::string& name, int onnx_type, const std::vector<std::int64_t>& dims,
                                 const std::vector<std::string>& symbols) {
  set_value_info(model_.mutable_graph()->add_output(), name, onnx_type, dims, symbols);
  return *this;
}

onnx::TensorProto OnnxBuilder::tensor_proto(const std::string& name, const Tensor& value) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(dtype_to_onnx(value.dtype()));
  for (auto d : value.shape()) t.add_dims(d);
  const Tensor c = value.contiguous();
  t.set_raw_data(std::string(static_cast<const char*>(c.raw_data()), c.nbytes()));
  return t;
}

OnnxBuilder& OnnxBuilder::initializer(const std::string& name, const Tensor& value) {
  *model_.mutable_graph()->add_initializer() = tensor_proto(name, value);
  return *this;
}

onnx::NodeProto& OnnxBuilder::node(const std::string& op_type, const std::vector<std::string>& inputs,
                                   const std::vector<std::string>& outputs, const std::string& name) {
  auto* n = model_.mutable_graph()->add_node();
  n->set_op_type(op_type);
  n->set_name(name);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return *n;
}

void OnnxBuilder::set_attr(onnx::NodeProto& node, const std::string& key, std::int64_t value) {
  auto* a = node.add_attribute();
  a->set_name(key);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
}

void OnnxBuilder::set_attr(onnx::NodeProto& node, const std::string& key, const std::vector<std::int64_t>& values) {
  auto* a = node.add_attribute();
  a->set_name(key);
  a->set_type(onnx::AttributeProto::INTS);
  for (auto v : values) a->add_ints(v);
}

void OnnxBuilder::set_attr(onnx::NodeProto& node, const std::string& key, const Tensor& value) {
  auto* a = node.add_attribute();
  a->set_name(key);
  a->set_type(onnx::AttributeProto::TENSOR);
  *a->mutable_t() = tensor_proto("", value);
}

void OnnxBuilder::set_attr(onnx::NodeProto& node, const std::string& key, const onnx::GraphProto& graph) {
  auto* a = node.add_attribute();
  a->set_name(key);
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = graph;
}

std::string OnnxBuilder::bytes() const { return model_.SerializeAsString(); }

void OnnxBuilder::save(const std::filesystem::path& file) const {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << bytes();
  if (!out.good()) throw std::runtime_error("cannot write " + file.string());
}

std::filesystem::path model_with_external(const std::filesystem::path& dir, const std::string& location,
                                          const std::string& offset, const std::string& length) {
  OnnxBuilder b(13);
  b.input("x", onnx::TensorProto::FLOAT, {4});
  b.initializer("w", Tensor::zeros(DType::kF32, {4}));
  b.node("Add", {"x", "w"}, {"y"}, "add");
  b.output("y", onnx::TensorProto::FLOAT, {4});
  onnx::TensorProto& w = *b.model().mutable_graph()->mutable_initializer(0);
  w.clear_raw_data();
  w.clear_float_data();
  w.set_data_location(onnx::TensorProto::EXTERNAL);
  auto add = [&](const std::string& key, const std::string& value) {
    auto* kv = w.add_external_data();
    kv->set_key(key);
    kv->set_value(value);
  };
  add("location", location);
  if (!offset.empty()) add("offset", offset);
  if (!length.empty()) add("length", length);
  const auto file = dir / "model.onnx";
  b.save(file);
  return file;
}

std::filesystem::path temp_dir(const std::string& tag) {
  static std::mt19937_64 rng(std::random_device{}());
  const auto dir = std::filesystem::temp_directory_path() /
                   ("redwood-test-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(rng() % 1000000));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace redwood::testing
