#include "core/onnx/onnx_import.hpp"

#include "core/mapped_file.hpp"
#include "core/onnx/detail/onnx_proto.hpp"
#include "core/onnx/model_cache.hpp"

#include "core/error.hpp"
#include "core/log.hpp"

#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

namespace redwood {

namespace {

std::string read_file(const std::filesystem::path& file) {
  RW_EXPECTS(std::filesystem::exists(file), IoError, "{}: no such file", file.string());
  RW_EXPECTS(std::filesystem::is_regular_file(file), IoError, "{}: not a regular file", file.string());
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  RW_EXPECTS(in.good(), IoError, "{}: cannot open", file.string());
  std::string bytes(static_cast<std::size_t>(in.tellg()), '\0');
  in.seekg(0);
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  RW_EXPECTS(static_cast<std::size_t>(in.gcount()) == bytes.size(), IoError, "{}: cannot read", file.string());
  return bytes;
}

// Copies `count` elements of a typed repeated field into dst, converting to the tensor's type.
template <typename Dst, typename Field>
void copy_field(const Field& field, Dst* dst, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) dst[i] = static_cast<Dst>(field.Get(static_cast<int>(i)));
}

// External data: a file in the model's folder (after resolving links: a location that is
// absolute, climbs out with "..", or links out is refused), a regular file (a FIFO or device
// would block the load or never end), with the offset and length inside it. Everything is
// checked before the tensor is allocated.
Tensor read_external_data(const onnx::TensorProto& proto, const std::string& where, const std::filesystem::path& model_dir,
                          DType dtype, const Shape& shape, std::size_t nbytes) {
  namespace fs = std::filesystem;
  std::string location;
  std::uint64_t offset = 0;
  std::int64_t length = -1;
  const auto number = [&](const std::string& key, const std::string& text) {
    std::uint64_t v = 0;
    const auto [rest, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    RW_EXPECTS(ec == std::errc() && rest == text.data() + text.size() && v <= (std::uint64_t{1} << 62), InvalidArgument,
               "{}: tensor '{}' has external data {} '{}', not a byte count", where, proto.name(), key, text);
    return v;
  };
  for (const auto& kv : proto.external_data()) {
    if (kv.key() == "location") location = kv.value();
    if (kv.key() == "offset") offset = number("offset", kv.value());
    if (kv.key() == "length") length = static_cast<std::int64_t>(number("length", kv.value()));
  }
  RW_EXPECTS(!location.empty(), InvalidArgument, "{}: tensor '{}' has external data without a location", where,
             proto.name());
  std::error_code ec;
  const fs::path folder = fs::weakly_canonical(model_dir.empty() ? fs::path(".") : model_dir, ec);
  const fs::path path = fs::weakly_canonical(folder / location, ec);
  const auto [outside, _] = std::mismatch(folder.begin(), folder.end(), path.begin(), path.end());
  RW_EXPECTS(!fs::path(location).is_absolute() && outside == folder.end(), InvalidArgument,
             "{}: tensor '{}' has external data at '{}', outside the model's folder {}", where, proto.name(), location,
             folder.string());
  RW_EXPECTS(fs::is_regular_file(path, ec), IoError, "{}: external data file {} of tensor '{}' is not a regular file",
             where, path.string(), proto.name());
  RW_EXPECTS(length < 0 || static_cast<std::size_t>(length) == nbytes, InvalidArgument,
             "{}: tensor '{}' external length {} differs from its size {}", where, proto.name(), length, nbytes);
  const std::uintmax_t size = fs::file_size(path, ec);
  RW_EXPECTS(!ec && offset <= size && size - offset >= nbytes, InvalidArgument,
             "{}: external data of tensor '{}' in {} is truncated ({} bytes from offset {} in a file of {})", where,
             proto.name(), path.string(), nbytes, offset, size);
  std::ifstream in(path, std::ios::binary);
  RW_EXPECTS(in.good(), IoError, "{}: external data file {} of tensor '{}' cannot be opened", where, path.string(),
             proto.name());
  Tensor t = Tensor::empty(dtype, shape);
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(static_cast<char*>(t.raw_data()), static_cast<std::streamsize>(nbytes));
  RW_EXPECTS(static_cast<std::size_t>(in.gcount()) == nbytes, InvalidArgument,
             "{}: external data of tensor '{}' in {} is truncated", where, proto.name(), path.string());
  return t;
}

// The values of a tensor's typed field (float_data, int64_data or int32_data, by element type).
int typed_field_size(const onnx::TensorProto& proto, DType dtype) {
  switch (dtype) {
    case DType::kF32: return proto.float_data_size();
    case DType::kI64: return proto.int64_data_size();
    case DType::kI32:
    case DType::kU8:
    case DType::kBool:
    case DType::kF16:
    case DType::kBF16: return proto.int32_data_size();  // 16-bit floats as their bit patterns
    case DType::kUndefined: break;
  }
  return 0;
}

}  // namespace

namespace onnx_detail {

Tensor tensor_from_proto(const onnx::TensorProto& proto, const std::string& where,
                         const std::filesystem::path& model_dir) {
  const DType dtype = dtype_from_onnx(proto.data_type());
  RW_EXPECTS(dtype != DType::kUndefined, Unsupported, "{}: tensor '{}' has element type {}, which Redwood does not hold",
             where, proto.name(), onnx_type_name(proto.data_type()));
  Shape shape(proto.dims().begin(), proto.dims().end());
  for (auto d : shape) {
    RW_EXPECTS(d >= 0, InvalidArgument, "{}: tensor '{}' has a negative dimension", where, proto.name());
  }
  // The element count is checked before the data is: dims whose product wraps around could
  // otherwise match a few bytes of data and size a buffer that the dims then overrun. The data is
  // checked against it before anything is allocated: dims far larger than the data a model
  // holds are an error naming the tensor, not an allocation of their size.
  std::int64_t n = 0;
  try {
    n = shape_numel(shape);
    (void)contiguous_strides(shape);  // an empty shape's other extents may still multiply past 2^56
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("{}: tensor '{}': {}", where, proto.name(), e.what()));
  }
  const std::size_t nbytes = static_cast<std::size_t>(n) * dtype_size(dtype);
  const auto description = [&] { return std::string(dtype_name(dtype)) + shape_str(shape); };

  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    return read_external_data(proto, where, model_dir, dtype, shape, nbytes);
  }
  if (proto.has_raw_data()) {
    RW_EXPECTS(proto.raw_data().size() == nbytes, InvalidArgument,
               "{}: tensor '{}' holds {} bytes of raw data but {} needs {}", where, proto.name(),
               proto.raw_data().size(), description(), nbytes);
    Tensor t = Tensor::empty(dtype, shape);
    std::memcpy(t.raw_data(), proto.raw_data().data(), nbytes);
    return t;
  }
  const int have = typed_field_size(proto, dtype);
  RW_EXPECTS(have == n, InvalidArgument, "{}: tensor '{}' holds {} values but {} needs {}", where, proto.name(), have,
             description(), n);
  Tensor t = Tensor::empty(dtype, shape);
  switch (dtype) {
    case DType::kF32: copy_field(proto.float_data(), t.data<float>(), n); break;
    case DType::kI64: copy_field(proto.int64_data(), t.data<std::int64_t>(), n); break;
    case DType::kI32: copy_field(proto.int32_data(), t.data<std::int32_t>(), n); break;
    case DType::kU8:
    case DType::kBool: copy_field(proto.int32_data(), static_cast<std::uint8_t*>(t.raw_data()), n); break;
    case DType::kF16:
    case DType::kBF16: copy_field(proto.int32_data(), static_cast<std::uint16_t*>(t.raw_data()), n); break;
    case DType::kUndefined: break;
  }
  return t;
}

}  // namespace onnx_detail

namespace {

using onnx_detail::tensor_from_proto;

ValueInfo value_from_proto(const onnx::ValueInfoProto& proto) {
  ValueInfo vi;
  vi.name = proto.name();
  if (!proto.has_type() || !proto.type().has_tensor_type()) return vi;
  const auto& tt = proto.type().tensor_type();
  vi.onnx_type = tt.elem_type();
  vi.dtype = dtype_from_onnx(tt.elem_type());
  if (tt.has_shape()) {
    vi.has_shape = true;
    for (const auto& d : tt.shape().dim()) {
      Dim dim;
      if (d.has_dim_value()) {
        dim.value = d.dim_value();
      } else if (d.has_dim_param()) {
        dim.symbol = d.dim_param();
      }
      vi.dims.push_back(dim);
    }
  }
  return vi;
}

AttributeValue attribute_from_proto(const onnx::AttributeProto& a, const Node& node,
                                    const std::filesystem::path& model_dir) {
  using A = onnx::AttributeProto;
  switch (a.type()) {
    case A::INT: return a.i();
    case A::FLOAT: return a.f();
    case A::STRING: return a.s();
    case A::INTS: return std::vector<std::int64_t>(a.ints().begin(), a.ints().end());
    case A::FLOATS: return std::vector<float>(a.floats().begin(), a.floats().end());
    case A::STRINGS: return std::vector<std::string>(a.strings().begin(), a.strings().end());
    case A::TENSOR: return tensor_from_proto(a.t(), node.where() + " attribute '" + a.name() + "'", model_dir);
    case A::GRAPH:
    case A::GRAPHS:
      throw Unsupported(fmt::format("{}: attribute '{}' holds a graph; Redwood runs no control flow (Loop, Scan), and an "
                                    "If only when its condition is a constant",
                                    node.where(), a.name()));
    default:
      throw Unsupported(fmt::format("{}: attribute '{}' has type {}, which Redwood does not read",
                                    node.where(), a.name(), A::AttributeType_Name(a.type())));
  }
}

// A Constant node's value as a tensor (every attribute form the op has).
Tensor constant_value(const Node& node) {
  if (node.has_attr("value")) return node.attr_tensor("value");
  if (node.has_attr("value_float")) return Tensor::scalar<float>(node.attr_float("value_float", 0));
  if (node.has_attr("value_int")) return Tensor::scalar<std::int64_t>(node.attr_int("value_int", 0));
  if (node.has_attr("value_floats")) {
    auto v = node.attr_floats("value_floats");
    return Tensor::from_vector<float>({static_cast<std::int64_t>(v.size())}, v);
  }
  if (node.has_attr("value_ints")) {
    auto v = node.attr_ints("value_ints");
    return Tensor::from_vector<std::int64_t>({static_cast<std::int64_t>(v.size())}, v);
  }
  throw Unsupported(fmt::format("{}: only tensor, float and int constants are supported (not sparse or string)",
                                node.where()));
}

// The IR node of `n`, named `name`.
Node node_from_proto(const onnx::NodeProto& n, std::string name, const std::filesystem::path& model_dir) {
  Node node;
  node.op_type = n.op_type();
  node.domain = n.domain() == "ai.onnx" ? "" : n.domain();
  node.name = std::move(name);
  node.inputs.assign(n.input().begin(), n.input().end());
  node.outputs.assign(n.output().begin(), n.output().end());
  for (const auto& a : n.attribute()) {
    RW_EXPECTS(a.ref_attr_name().empty(), Unsupported, "{}: attribute references (functions) are not supported",
               node.where());
    node.attributes[a.name()] = attribute_from_proto(a, node, model_dir);
  }
  return node;
}

}  // namespace

namespace onnx_detail {

std::string node_label(const onnx::NodeProto& node) {
  if (!node.name().empty()) return fmt::format("node '{}' ({})", node.name(), node.op_type());
  if (node.output_size() > 0) return fmt::format("the {} node writing '{}'", node.op_type(), node.output(0));
  return fmt::format("a {} node", node.op_type());
}

Tensor constant_from_proto(const onnx::NodeProto& node, const std::string& where,
                           const std::filesystem::path& model_dir) {
  try {
    return constant_value(node_from_proto(node, node.name().empty() ? node.op_type() : node.name(), model_dir));
  } catch (const Unsupported& e) {
    throw Unsupported(fmt::format("{}: {}", where, e.what()));
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("{}: {}", where, e.what()));
  }
}

}  // namespace onnx_detail

namespace {

// Whether any tensor of the graph or of the graphs nested in it (an initializer, a tensor
// attribute) keeps its bytes in another file.
bool uses_external_data(const onnx::GraphProto& g) {
  for (const auto& t : g.initializer()) {
    if (t.data_location() == onnx::TensorProto::EXTERNAL) return true;
  }
  for (const auto& n : g.node()) {
    for (const auto& a : n.attribute()) {
      if (a.has_t() && a.t().data_location() == onnx::TensorProto::EXTERNAL) return true;
      if (a.has_g() && uses_external_data(a.g())) return true;
      for (const auto& sub : a.graphs()) {
        if (uses_external_data(sub)) return true;
      }
    }
  }
  return false;
}

std::shared_ptr<Graph> import_model(std::string_view bytes, const std::string& source,
                                    const OnnxImportOptions& options, bool* external);

}  // namespace

std::shared_ptr<Graph> load_onnx(const std::filesystem::path& file, const OnnxImportOptions& options) {
  RW_EXPECTS(std::filesystem::exists(file), IoError, "{}: no such file", file.string());
  RW_EXPECTS(std::filesystem::is_regular_file(file), IoError, "{}: not a regular file", file.string());
  // Mapped, not copied: the hash and protobuf read the pages where they are.
  const std::shared_ptr<MappedFile> mapped = MappedFile::open(file);
  const std::string_view bytes = mapped->bytes();
  bool external = false;
  if (!options.cache) return import_model(bytes, file.string(), options, &external);
  const std::filesystem::path entry = model_cache_file(model_cache_dir(), bytes, options);
  if (auto graph = read_model_cache(entry, file.string())) return graph;
  auto graph = import_model(bytes, file.string(), options, &external);
  if (!external) write_model_cache(entry, *graph);
  return graph;
}

std::shared_ptr<Graph> load_onnx_bytes(const std::string& bytes, const std::string& source,
                                       const OnnxImportOptions& options) {
  bool external = false;
  return import_model(bytes, source, options, &external);
}

namespace {

// ONNX's own shape inference divides by the strides of convolutions and pools (and by their
// dilated kernels) without looking: a stride of 0 stopped the process with SIGFPE inside
// libonnx (found by tests/fuzz/onnx_import_fuzz.cpp). So those windows are checked first, in
// subgraphs too.
void check_window_attributes(const onnx::GraphProto& g, const std::string& source) {
  static const std::set<std::string> windowed = {"Conv",    "ConvTranspose", "ConvInteger", "QLinearConv", "MaxPool",
                                                 "AveragePool", "LpPool",   "MaxUnpool",   "DeformConv",  "Col2Im"};
  for (const auto& n : g.node()) {
    for (const auto& a : n.attribute()) {
      if (a.has_g()) check_window_attributes(a.g(), source);
      for (const auto& sub : a.graphs()) check_window_attributes(sub, source);
      if (!windowed.count(n.op_type()) || (a.name() != "strides" && a.name() != "dilations" && a.name() != "kernel_shape")) {
        continue;
      }
      for (auto v : a.ints()) {
        RW_EXPECTS(v > 0, InvalidArgument, "{}: node '{}' ({}): {} must be positive, not {}", source, n.name(), n.op_type(),
                   a.name(), v);
      }
    }
  }
}

std::shared_ptr<Graph> import_model(std::string_view bytes, const std::string& source,
                                    const OnnxImportOptions& options, bool* external) {
  onnx::ModelProto model;
  RW_EXPECTS(!bytes.empty(), InvalidArgument, "{}: the file is empty, not an ONNX model", source);
  RW_EXPECTS(bytes.size() <= static_cast<std::size_t>(std::numeric_limits<int>::max()), Unsupported,
             "{}: {} bytes; protobuf reads a model of up to 2 GiB (larger ones keep their weights in external data)",
             source, bytes.size());
  RW_EXPECTS(model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())), InvalidArgument,
             "{}: not a valid ONNX model (the protobuf does not parse: truncated or corrupt file?)", source);
  RW_EXPECTS(model.has_graph() && model.graph().node_size() + model.graph().output_size() > 0,
             InvalidArgument, "{}: the ONNX model has no graph (truncated or corrupt file?)", source);
  const std::filesystem::path model_dir = std::filesystem::path(source).parent_path();
  *external = uses_external_data(model.graph());
  onnx_detail::check_opsets(model, source);
  check_window_attributes(model.graph(), source);
  onnx_detail::sort_graph(*model.mutable_graph(), source, true);
  if (options.check) onnx_detail::check_model(model, source, model_dir);
  onnx_detail::inline_constant_ifs(*model.mutable_graph(), source, model_dir);
  if (options.infer_shapes) {
    try {
      onnx::shape_inference::InferShapes(model);
    } catch (const std::exception& e) {
      // Shape inference only adds information; a model it cannot follow may still run.
      log().warn("{}: ONNX shape inference stopped: {}", source, e.what());
    }
  }

  auto graph = std::make_shared<Graph>();
  const auto& g = model.graph();
  graph->name = g.name();
  graph->source = source;
  for (const auto& op : model.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") graph->opset = op.version();
  }
  for (const auto& n : g.node()) {
    RW_EXPECTS(graph->opset > 0 || !(n.domain().empty() || n.domain() == "ai.onnx"), InvalidArgument,
               "{}: node '{}' ({}) is in the default domain but the model imports no default-domain opset",
               source, n.name(), n.op_type());
  }

  for (const auto& init : g.initializer()) {
    graph->initializers[init.name()] = tensor_from_proto(init, source, model_dir);
  }
  RW_EXPECTS(g.sparse_initializer_size() == 0, Unsupported, "{}: sparse initializers are not supported", source);
  for (const auto& in : g.input()) {
    ValueInfo vi = value_from_proto(in);
    graph->value_info[vi.name] = vi;
    if (graph->initializers.count(in.name())) continue;  // older models list initializers as inputs
    RW_EXPECTS(in.type().has_tensor_type(), Unsupported, "{}: input '{}' is not a tensor (sequences and maps are not supported)",
               source, in.name());
    RW_EXPECTS(vi.dtype != DType::kUndefined, Unsupported,
               "{}: input '{}' has element type {}, which Redwood does not hold", source, vi.name,
               onnx_type_name(vi.onnx_type));
    graph->inputs.push_back(std::move(vi));
  }
  for (const auto& v : g.value_info()) {
    ValueInfo vi = value_from_proto(v);
    graph->value_info[vi.name] = vi;
  }
  for (const auto& out : g.output()) {
    ValueInfo vi = value_from_proto(out);
    RW_EXPECTS(out.type().has_tensor_type(), Unsupported, "{}: output '{}' is not a tensor", source, out.name());
    graph->value_info[vi.name] = vi;
    graph->outputs.push_back(std::move(vi));
  }

  std::set<std::string> names;
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    Node node = node_from_proto(
        n, n.name().empty() || names.count(n.name()) ? n.op_type() + "_" + std::to_string(i) : n.name(), model_dir);
    names.insert(node.name);
    // Constants become initializers: kernels then see them as constant inputs at load.
    if (node.op_type == "Constant" && node.domain.empty() && node.outputs.size() == 1) {
      graph->initializers[node.outputs[0]] = constant_value(node);
      continue;
    }
    graph->nodes.push_back(std::move(node));
  }
  graph->sort_topologically();
  log().debug("{}: {} nodes, {} initializers, opset {}", source, graph->nodes.size(),
              graph->initializers.size(), graph->opset);
  return graph;
}

}  // namespace

Tensor load_onnx_tensor(const std::filesystem::path& file) {
  const std::string bytes = read_file(file);
  onnx::TensorProto proto;
  RW_EXPECTS(proto.ParseFromString(bytes), InvalidArgument, "{}: not a serialized ONNX TensorProto", file.string());
  return onnx_detail::tensor_from_proto(proto, file.string(), file.parent_path());
}

}  // namespace redwood
