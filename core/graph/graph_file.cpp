#include "core/graph/graph_file.hpp"

#include "core/cache_dir.hpp"
#include "core/error.hpp"
#include "core/mapped_file.hpp"
#include "core/ops/schema.hpp"

#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <type_traits>

namespace redwood {
namespace {

constexpr char kMagic[8] = {'R', 'W', 'G', 'R', 'A', 'P', 'H', '\0'};
constexpr std::size_t kHeaderBytes = 24;  // magic, format, reserved, description bytes
constexpr std::size_t kAlign = 64;
// Attribute kinds, in AttributeValue's order.
enum class AttrKind : std::uint8_t { kInt, kFloat, kString, kInts, kFloats, kStrings, kTensor };

std::size_t align_up(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Every refusal of a file reads the same: the file, then the first thing wrong with it.
[[noreturn]] void refuse(const std::filesystem::path& path, const std::string& what) {
  throw InvalidArgument(fmt::format("{}: not a Redwood graph file Redwood can read ({})", path.string(), what));
}

// The description, built in memory; tensors' bytes are laid out after it.
class Writer {
 public:
  template <typename T>
  void put(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&value), sizeof(T));
  }
  void put_size(std::size_t n) { put<std::uint64_t>(n); }
  void put(const std::string& s) {
    put_size(s.size());
    out_.append(s);
  }
  void put(const Tensor& t) {
    put<std::uint8_t>(static_cast<std::uint8_t>(t.dtype()));
    if (!t.defined()) return;
    put_size(t.shape().size());
    for (std::int64_t d : t.shape()) put<std::int64_t>(d);
    Tensor c = t.contiguous();
    put_size(data_bytes_);
    put_size(c.nbytes());
    data_bytes_ += align_up(c.nbytes());
    tensors_.push_back(std::move(c));
  }
  void put(const ValueInfo& v) {
    put(v.name);
    put<std::uint8_t>(static_cast<std::uint8_t>(v.dtype));
    put<std::int32_t>(v.onnx_type);
    put<std::uint8_t>(v.has_shape ? 1 : 0);
    put_size(v.dims.size());
    for (const Dim& d : v.dims) {
      put<std::int64_t>(d.value);
      put(d.symbol);
    }
  }
  void put(const std::vector<std::string>& names) {
    put_size(names.size());
    for (const auto& n : names) put(n);
  }
  void put(const AttributeValue& a) {
    put<std::uint8_t>(static_cast<std::uint8_t>(a.index()));
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, std::vector<std::int64_t>> || std::is_same_v<V, std::vector<float>>) {
            put_size(v.size());
            for (auto x : v) put(x);
          } else {
            put(v);
          }
        },
        a);
  }
  void put(const Node& n) {
    put(n.name);
    put(n.op_type);
    put(n.domain);
    put(n.inputs);
    put(n.outputs);
    put_size(n.attributes.size());
    for (const auto& [key, value] : n.attributes) {
      put(key);
      put(value);
    }
    put_size(n.body.size());
    for (const Node& b : n.body) put(b);
  }

  const std::string& description() const { return out_; }
  std::size_t data_bytes() const { return data_bytes_; }
  const std::vector<Tensor>& tensors() const { return tensors_; }

 private:
  std::string out_;
  std::vector<Tensor> tensors_;  // contiguous, in the order of their offsets
  std::size_t data_bytes_ = 0;
};

// Reads the description back, checking every count and offset against what the file holds.
class Reader {
 public:
  Reader(const std::filesystem::path& path, const std::byte* begin, std::size_t size,
         std::shared_ptr<MappedFile> file, std::size_t data_offset, std::size_t data_bytes)
      : path_(path), at_(begin), end_(begin + size), file_(std::move(file)), data_offset_(data_offset),
        data_bytes_(data_bytes) {}

  template <typename T>
  T get(const char* what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, at_, sizeof(T));
    at_ += sizeof(T);
    return value;
  }
  // A count of things of at least `min_bytes` each: never more than the rest of the description
  // could hold, so a corrupt count cannot make a reader reserve gigabytes.
  std::size_t get_count(const char* what, std::size_t min_bytes) {
    const auto n = get<std::uint64_t>(what);
    if (n > static_cast<std::uint64_t>(end_ - at_) / std::max<std::size_t>(min_bytes, 1)) {
      fail(fmt::format("{} says {} entries, more than the file holds", what, n));
    }
    return static_cast<std::size_t>(n);
  }
  std::string get_string(const char* what) {
    const std::size_t n = get_count(what, 1);
    std::string s(reinterpret_cast<const char*>(at_), n);
    at_ += n;
    return s;
  }
  std::vector<std::string> get_strings(const char* what) {
    std::vector<std::string> out(get_count(what, 8));
    for (auto& s : out) s = get_string(what);
    return out;
  }
  DType get_dtype(const char* what) {
    const auto d = get<std::uint8_t>(what);
    if (d > static_cast<std::uint8_t>(DType::kUndefined)) fail(fmt::format("{}: no dtype {}", what, d));
    return static_cast<DType>(d);
  }
  Tensor get_tensor(const char* what) {
    const DType dtype = get_dtype(what);
    if (dtype == DType::kUndefined) return Tensor();
    const std::size_t rank = get_count(what, 8);
    if (rank > 8) fail(fmt::format("{}: rank {} (Redwood holds up to 8)", what, rank));
    Shape shape;
    std::size_t elements = 1;
    for (std::size_t i = 0; i < rank; ++i) {
      const auto d = get<std::int64_t>(what);
      if (d < 0 || (d > 0 && elements > (std::size_t{1} << 48) / static_cast<std::size_t>(d))) {
        fail(fmt::format("{}: extent {}", what, d));
      }
      elements *= static_cast<std::size_t>(d);
      shape.push_back(d);
    }
    const auto offset = get<std::uint64_t>(what);
    const auto bytes = get<std::uint64_t>(what);
    if (bytes != elements * dtype_size(dtype) || offset % kAlign != 0 || offset > data_bytes_ ||
        bytes > data_bytes_ - offset) {
      fail(fmt::format("{}: {} bytes at {} do not fit its shape or the file", what, bytes, offset));
    }
    std::byte* data = file_->data() + data_offset_ + offset;
    return Tensor::adopt(data, bytes, Device::kCpu, dtype, std::move(shape), [keep = file_](void*) {});
  }
  ValueInfo get_value_info() {
    ValueInfo v;
    v.name = get_string("a value's name");
    v.dtype = get_dtype("a value's dtype");
    v.onnx_type = get<std::int32_t>("a value's type");
    v.has_shape = get<std::uint8_t>("a value's shape flag") != 0;
    v.dims.resize(get_count("a value's dimensions", 16));
    for (Dim& d : v.dims) {
      d.value = get<std::int64_t>("a dimension");
      d.symbol = get_string("a dimension's symbol");
    }
    return v;
  }
  template <typename T>
  std::vector<T> get_numbers(const char* what) {
    std::vector<T> out(get_count(what, sizeof(T)));
    for (auto& x : out) x = get<T>(what);
    return out;
  }
  AttributeValue get_attribute(const std::string& where) {
    const char* what = "an attribute";
    switch (static_cast<AttrKind>(get<std::uint8_t>(what))) {
      case AttrKind::kInt: return get<std::int64_t>(what);
      case AttrKind::kFloat: return get<float>(what);
      case AttrKind::kString: return get_string(what);
      case AttrKind::kInts: return get_numbers<std::int64_t>(what);
      case AttrKind::kFloats: return get_numbers<float>(what);
      case AttrKind::kStrings: return get_strings(what);
      case AttrKind::kTensor: return get_tensor(what);
    }
    fail(fmt::format("{}: an attribute of unknown kind", where));
  }
  Node get_node(int depth) {
    if (depth > 16) fail("nodes nested more than 16 deep");
    Node n;
    n.name = get_string("a node's name");
    n.op_type = get_string("a node's op");
    n.domain = get_string("a node's domain");
    n.inputs = get_strings("a node's inputs");
    n.outputs = get_strings("a node's outputs");
    const std::size_t attributes = get_count("a node's attributes", 9);
    for (std::size_t i = 0; i < attributes; ++i) {
      std::string key = get_string("an attribute's name");
      n.attributes.emplace(std::move(key), get_attribute(n.where()));
    }
    n.body.resize(get_count("a node's body", 40));
    for (Node& b : n.body) b = get_node(depth + 1);
    return n;
  }
  bool done() const { return at_ == end_; }

  [[noreturn]] void fail(const std::string& what) const { refuse(path_, what); }

 private:
  void need(std::size_t n, const char* what) const {
    if (static_cast<std::size_t>(end_ - at_) < n) fail(fmt::format("cut short in {}", what));
  }
  const std::filesystem::path& path_;
  const std::byte* at_;
  const std::byte* end_;
  std::shared_ptr<MappedFile> file_;
  std::size_t data_offset_;
  std::size_t data_bytes_;
};

template <typename T>
void append(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

}  // namespace

void write_graph_file(const std::filesystem::path& path, const Graph& graph, const std::string& stamp) {
  Writer w;
  w.put(stamp);
  w.put(graph.name);
  w.put<std::int64_t>(graph.opset);
  w.put_size(graph.inputs.size());
  for (const auto& v : graph.inputs) w.put(v);
  w.put_size(graph.outputs.size());
  for (const auto& v : graph.outputs) w.put(v);
  w.put_size(graph.value_info.size());
  for (const auto& [name, v] : graph.value_info) w.put(v);
  w.put_size(graph.initializers.size());
  for (const auto& [name, t] : graph.initializers) {
    w.put(name);
    w.put(t);
  }
  w.put_size(graph.nodes.size());
  for (const Node& n : graph.nodes) w.put(n);
  w.put_size(w.data_bytes());  // last: the data section's size, which tells a file cut short

  const std::string& description = w.description();
  write_file_atomically(path, [&](std::ostream& out) {
    std::string head(kMagic, sizeof(kMagic));
    append<std::uint32_t>(head, kGraphFileFormat);
    append<std::uint32_t>(head, 0);
    append<std::uint64_t>(head, description.size());
    head += description;
    head.resize(align_up(head.size()), '\0');
    out.write(head.data(), static_cast<std::streamsize>(head.size()));
    static const char zeros[kAlign] = {};
    for (const Tensor& t : w.tensors()) {
      out.write(static_cast<const char*>(t.raw_data()), static_cast<std::streamsize>(t.nbytes()));
      out.write(zeros, static_cast<std::streamsize>(align_up(t.nbytes()) - t.nbytes()));
    }
  });
}

std::shared_ptr<Graph> read_graph_file(const std::filesystem::path& path, std::string* stamp) {
  // The tensors are views of the mapping (page-aligned, so each tensor 64-byte aligned).
  const std::shared_ptr<MappedFile> file = MappedFile::open(path, MappedFile::Access::kCopyOnWrite);
  const std::size_t size = file->size();

  auto fail = [&](const std::string& what) { refuse(path, what); };
  if (size < kHeaderBytes || std::memcmp(file->data(), kMagic, sizeof(kMagic)) != 0) fail("no RWGRAPH header");
  std::uint32_t format = 0;
  std::uint64_t description_bytes = 0;
  std::memcpy(&format, file->data() + 8, sizeof(format));
  std::memcpy(&description_bytes, file->data() + 16, sizeof(description_bytes));
  if (format != kGraphFileFormat) fail(fmt::format("format {}, this Redwood reads {}", format, kGraphFileFormat));
  if (description_bytes > size - kHeaderBytes) fail("cut short in its description");
  const std::size_t data_offset = align_up(kHeaderBytes + description_bytes);
  if (data_offset > size) fail("cut short before its data");

  Reader r(path, file->data() + kHeaderBytes, description_bytes, file, data_offset, size - data_offset);
  std::string file_stamp = r.get_string("its stamp");
  auto graph = std::make_shared<Graph>();
  graph->name = r.get_string("the graph's name");
  graph->opset = r.get<std::int64_t>("the opset");
  graph->inputs.resize(r.get_count("the inputs", 16));
  for (auto& v : graph->inputs) v = r.get_value_info();
  graph->outputs.resize(r.get_count("the outputs", 16));
  for (auto& v : graph->outputs) v = r.get_value_info();
  const std::size_t infos = r.get_count("the value infos", 16);
  for (std::size_t i = 0; i < infos; ++i) {
    ValueInfo v = r.get_value_info();
    std::string name = v.name;
    graph->value_info.emplace(std::move(name), std::move(v));
  }
  const std::size_t initializers = r.get_count("the initializers", 9);
  for (std::size_t i = 0; i < initializers; ++i) {
    std::string name = r.get_string("an initializer's name");
    graph->initializers.emplace(std::move(name), r.get_tensor("an initializer"));
  }
  graph->nodes.resize(r.get_count("the nodes", 40));
  for (Node& n : graph->nodes) n = r.get_node(0);
  const auto data_bytes = r.get<std::uint64_t>("the data's size");
  if (!r.done()) r.fail("bytes left after its description");
  if (data_bytes != size - data_offset) {
    r.fail(fmt::format("its data is {} bytes, not the {} it was written with: cut short or grown", size - data_offset,
                       data_bytes));
  }
  // Redwood's own ops as their schemas declare them (a file from another build, or edited).
  for (const Node& n : graph->nodes) {
    try {
      ops::check_node(n);
    } catch (const InvalidArgument& e) {
      fail(e.what());
    }
  }
  if (stamp != nullptr) *stamp = std::move(file_stamp);
  return graph;
}

}  // namespace redwood
