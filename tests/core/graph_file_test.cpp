// Redwood's graph file (what the model cache keeps): every field of a graph comes back (every
// attribute kind, a composite node's body, symbolic dimensions, initializers by their bytes), a
// shipped model read back computes what the imported one computes, and a damaged file (cut
// anywhere, bytes flipped, another format) is an error naming the file, never a crash.

#include "backends/cuda/passes/gpu_pipeline.hpp"
#include "core/error.hpp"
#include "runtime/executor.hpp"
#include "core/graph/graph_file.hpp"
#include "core/graph/graph_hash.hpp"
#include "core/ops/names.hpp"
#include "core/onnx/onnx_import.hpp"
#include "core/passes/pass_manager.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

namespace redwood {
namespace {

// x -> Conv(W, B) -> a composite node with a body -> y, with every attribute kind somewhere.
std::shared_ptr<Graph> every_field_graph() {
  auto g = testing::make_x_to_y_graph("every field");
  g->inputs[0].dims = {Dim{-1, "N"}, Dim{3, ""}, Dim{8, ""}, Dim{8, ""}};
  g->inputs[0].has_shape = true;
  g->initializers["W"] = testing::random_tensor(DType::kF32, {4, 3, 3, 3}, -1, 1, 7);
  g->initializers["B"] = testing::random_tensor(DType::kF16, {4}, -1, 1, 8);
  g->initializers["idx"] = Tensor::from_vector<std::int64_t>({3}, {0, -1, 5});
  g->initializers["empty"] = Tensor::empty(DType::kU8, {0, 4});
  Node conv = testing::make_node("conv", "Conv", {"x", "W", "", "B"}, {"c"});
  conv.attributes["pads"] = std::vector<std::int64_t>{1, 1, 1, 1};
  conv.attributes["alpha"] = 0.25f;
  conv.attributes["group"] = std::int64_t{1};
  conv.attributes["auto_pad"] = std::string("NOTSET");
  conv.attributes["scales"] = std::vector<float>{0.5f, 2.0f};
  conv.attributes["names"] = std::vector<std::string>{"a", "", "ccc"};
  conv.attributes["value"] = Tensor::from_vector<float>({2}, {1.5f, -2.0f});
  Node fused = testing::make_node("fused", "FusedRegion", {"c"}, {"y"});
  fused.domain = "redwood";
  fused.body.push_back(testing::make_node("inner relu", "Relu", {"c"}, {"r"}));
  fused.body.back().body.push_back(testing::make_node("deeper", "Identity", {"r"}, {"y"}));
  g->nodes = {conv, fused};
  g->value_info["c"] = ValueInfo{"c", DType::kF32, 1, true, {Dim{-1, "N"}, Dim{4, ""}}};
  g->opset = 17;
  return g;
}

void expect_same(const Graph& a, const Graph& b) {
  EXPECT_EQ(graph_hash(a), graph_hash(b));  // names, nodes, attributes, bodies, initializers' bytes
  ASSERT_EQ(a.value_info.size(), b.value_info.size());
  for (const auto& [name, v] : a.value_info) {
    const ValueInfo& w = b.value_info.at(name);
    EXPECT_EQ(v.description(), w.description()) << name;
    EXPECT_EQ(v.onnx_type, w.onnx_type) << name;
  }
}

TEST(GraphFile, EveryFieldComesBack) {
  const auto dir = testing::temp_dir("graph-file");
  const auto g = every_field_graph();
  write_graph_file(dir / "g.rwgraph", *g, "stamp line");
  std::string stamp;
  const auto back = read_graph_file(dir / "g.rwgraph", &stamp);
  EXPECT_EQ(stamp, "stamp line");
  expect_same(*g, *back);
  EXPECT_EQ(back->name, "every field");
  EXPECT_EQ(back->inputs[0].dims[0].symbol, "N");
  ASSERT_EQ(back->nodes.size(), 2u);
  ASSERT_EQ(back->nodes[1].body.size(), 1u);
  EXPECT_EQ(back->nodes[1].body[0].body[0].name, "deeper");
  EXPECT_EQ(back->nodes[0].attr_floats("scales"), (std::vector<float>{0.5f, 2.0f}));
  EXPECT_EQ(std::get<std::vector<std::string>>(back->nodes[0].attributes.at("names")),
            (std::vector<std::string>{"a", "", "ccc"}));
  // The tensors are views of the file's one buffer, each 64-byte aligned.
  for (const auto& [name, t] : back->initializers) {
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.raw_data()) % 64, 0u) << name;
  }
  EXPECT_EQ(back->initializers.at("empty").shape(), (Shape{0, 4}));
  EXPECT_TRUE(back->source.empty());
}

TEST(GraphFile, ATensorOutlivesTheGraphItCameFrom) {
  const auto dir = testing::temp_dir("graph-file-life");
  write_graph_file(dir / "g.rwgraph", *every_field_graph());
  Tensor w;
  {
    auto back = read_graph_file(dir / "g.rwgraph");
    w = back->initializers.at("W");
  }
  const Tensor expected = testing::random_tensor(DType::kF32, {4, 3, 3, 3}, -1, 1, 7);
  EXPECT_EQ(w.to_float_vector(), expected.to_float_vector());
}

TEST(GraphFile, AShippedModelReadBackComputesTheSame) {
  const auto file = testing::assets_dir() / "models" / "ch_PP-OCRv4_rec_infer.onnx";
  if (!std::filesystem::exists(file)) GTEST_SKIP() << file << " is missing (scripts/setup.sh fetches it)";
  const auto imported = load_onnx(file);
  const auto dir = testing::temp_dir("graph-file-rec");
  write_graph_file(dir / "rec.rwgraph", *imported);
  const auto back = read_graph_file(dir / "rec.rwgraph");
  expect_same(*imported, *back);
  const Tensor x = testing::random_tensor(DType::kF32, {1, 3, 48, 80}, -1, 1, 3);
  Executor a(imported), b(back);
  const auto ya = a.run({{"x", x}});
  const auto yb = b.run({{"x", x}});
  ASSERT_EQ(ya.size(), yb.size());
  for (std::size_t i = 0; i < ya.size(); ++i) EXPECT_EQ(ya[i].to_float_vector(), yb[i].to_float_vector());
}

// What the CUDA runner keeps in its plan cache: a model after the GPU's passes (NHWC fp16 groups,
// the space-to-depth stem, fused shortcuts and elementwise chains, composite nodes with bodies).
TEST(GraphFile, AModelAfterTheGpuPassesComesBack) {
  const auto file = testing::assets_dir() / "models" / "ch_PP-OCRv4_det_infer.onnx";
  if (!std::filesystem::exists(file)) GTEST_SKIP() << file << " is missing (scripts/setup.sh fetches it)";
  Graph g = *load_onnx(file);
  const auto records = passes::optimize(
      g, passes::gpu_pipeline({.nhwc_storage = DType::kF16, .space_to_depth_stem = true, .fuse_shortcuts = true}));
  ASSERT_FALSE(records.empty());
  const auto dir = testing::temp_dir("graph-file-gpu");
  write_graph_file(dir / "det.rwgraph", g);
  const auto back = read_graph_file(dir / "det.rwgraph");
  expect_same(g, *back);
  ASSERT_EQ(g.nodes.size(), back->nodes.size());
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    EXPECT_EQ(g.nodes[i].op_type, back->nodes[i].op_type);
    EXPECT_EQ(g.nodes[i].body.size(), back->nodes[i].body.size()) << g.nodes[i].name;
  }
}

std::string read_error(const std::filesystem::path& file) {
  try {
    read_graph_file(file);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(GraphFile, ARedwoodOpOutsideItsSchemaIsRefused) {
  // Redwood's own ops are held to core/ops/schema.cpp when a saved graph is read back.
  auto g = testing::make_x_to_y_graph("schema");
  Node back = testing::make_node("back", ops::kToNchw, {"x"}, {"y"});  // without its required rw.channels
  g->nodes.push_back(back);
  const auto dir = testing::temp_dir("graph-file-schema");
  write_graph_file(dir / "bad.rwgraph", *g);
  const std::string e = read_error(dir / "bad.rwgraph");
  EXPECT_NE(e.find("bad.rwgraph"), std::string::npos) << e;
  EXPECT_NE(e.find("node 'back' (rw.ToNchw): attribute 'rw.channels' is required"), std::string::npos) << e;
  g->nodes.back().attributes[ops::attr::kChannels] = std::int64_t{3};
  write_graph_file(dir / "good.rwgraph", *g);
  EXPECT_EQ(read_error(dir / "good.rwgraph"), "");
}

void write_bytes(const std::filesystem::path& file, const std::string& bytes) {
  std::ofstream(file, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string file_bytes(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(GraphFile, AFileCutAnywhereIsAnErrorNamingIt) {
  const auto dir = testing::temp_dir("graph-file-cut");
  write_graph_file(dir / "g.rwgraph", *every_field_graph());
  const std::string whole = file_bytes(dir / "g.rwgraph");
  const auto cut = dir / "cut.rwgraph";
  // Every length up to the data section, then a few inside it.
  std::vector<std::size_t> lengths;
  for (std::size_t n = 0; n < whole.size(); n += n < 2048 ? 1 : 97) lengths.push_back(n);
  for (std::size_t n : lengths) {
    write_bytes(cut, whole.substr(0, n));
    const std::string e = read_error(cut);
    ASSERT_FALSE(e.empty()) << "cut at " << n << " of " << whole.size() << " bytes was read";
    EXPECT_NE(e.find(cut.string()), std::string::npos) << e;
  }
}

TEST(GraphFile, FlippedBytesNeverCrash) {
  const auto dir = testing::temp_dir("graph-file-flip");
  write_graph_file(dir / "g.rwgraph", *every_field_graph());
  const std::string whole = file_bytes(dir / "g.rwgraph");
  const auto bad = dir / "bad.rwgraph";
  std::mt19937 rng(5);
  int refused = 0;
  for (int i = 0; i < 400; ++i) {
    std::string bytes = whole;
    // In the header and description, where counts and offsets live.
    const std::size_t at = rng() % std::min<std::size_t>(bytes.size(), 1024);
    bytes[at] = static_cast<char>(bytes[at] ^ (1 << (rng() % 8)));
    write_bytes(bad, bytes);
    refused += read_error(bad).empty() ? 0 : 1;  // either read (a name's letter changed) or refused
  }
  EXPECT_GT(refused, 0);
}

TEST(GraphFile, AnotherFormatOrNoHeaderIsRefused) {
  const auto dir = testing::temp_dir("graph-file-format");
  write_graph_file(dir / "g.rwgraph", *every_field_graph());
  std::string bytes = file_bytes(dir / "g.rwgraph");
  bytes[8] = static_cast<char>(kGraphFileFormat + 1);
  write_bytes(dir / "next.rwgraph", bytes);
  EXPECT_NE(read_error(dir / "next.rwgraph").find("format 2, this Redwood reads 1"), std::string::npos);
  write_bytes(dir / "onnx.rwgraph", "\x08\x07\x12\x04test");
  EXPECT_NE(read_error(dir / "onnx.rwgraph").find("no RWGRAPH header"), std::string::npos);
  EXPECT_NE(read_error(dir / "missing.rwgraph").find("cannot open"), std::string::npos);
}

}  // namespace
}  // namespace redwood
