// The content hash the plan cache keys its entries by: XXH64 against its published values, the
// same graph hashing the same however it is loaded, any change of content (one weight byte, an
// attribute) changing it while names alone do not make two graphs equal, and its speed on a
// model of ResNet-50's size.

#include "core/graph/graph_hash.hpp"
#include "core/onnx/onnx_import.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <string>

namespace redwood {
namespace {

TEST(GraphHash, Xxh64MatchesPublishedValues) {
  // Published values (seed 0): xxHash's and python-xxhash's examples.
  EXPECT_EQ(xxh64("", 0), 0xEF46DB3751D8E999ull);
  EXPECT_EQ(xxh64("a", 1), 0xD24EC4F1A98C6E5Bull);
  EXPECT_EQ(xxh64("abc", 3), 0x44BC2CF5AD770999ull);
  const std::string long_text = "Nobody inspects the spammish repetition";  // over one 32-byte stripe
  EXPECT_EQ(xxh64(long_text.data(), long_text.size()), 0xFBCEA83C8A378BF1ull);
  // Bytes 0, 1, 2, ...: every path (8-byte words; three stripes and a tail), as libxxhash 0.8.1 gives them.
  std::vector<unsigned char> bytes(100);
  std::iota(bytes.begin(), bytes.end(), 0);
  EXPECT_EQ(xxh64(bytes.data(), 8), 0x884A173614B81B8Dull);
  EXPECT_EQ(xxh64(bytes.data(), 100), 0x6AC1E58032166597ull);
}

TEST(GraphHash, PiecesHashAsTheWhole) {
  std::vector<unsigned char> bytes(200);
  std::iota(bytes.begin(), bytes.end(), 7);
  for (std::size_t n : {0, 1, 31, 32, 33, 64, 100, 200}) {
    for (std::size_t cut : {std::size_t{0}, n / 3, n / 2, n}) {
      ContentHash h;
      h.update(bytes.data(), cut);
      h.update(bytes.data() + cut, n - cut);
      EXPECT_EQ(h.digest(), xxh64(bytes.data(), n)) << n << " bytes cut at " << cut;
    }
  }
}

TEST(GraphHash, FramedValuesKeepTheirBoundaries) {
  ContentHash a, b;
  a.add(std::string_view("ab"));
  a.add(std::string_view("c"));
  b.add(std::string_view("a"));
  b.add(std::string_view("bc"));
  EXPECT_NE(a.digest(), b.digest());
}

// x -> Conv(W, B) -> Relu -> y, the names fixed and the weights from a seed.
std::shared_ptr<Graph> small_model(std::uint32_t seed) {
  auto g = testing::make_x_to_y_graph("small");
  g->initializers["W"] = testing::random_tensor(DType::kF32, {8, 3, 3, 3}, -1, 1, seed);
  g->initializers["B"] = testing::random_tensor(DType::kF32, {8}, -1, 1, seed + 1);
  Node conv = testing::make_node("conv", "Conv", {"x", "W", "B"}, {"h"});
  conv.attributes["pads"] = std::vector<std::int64_t>{1, 1, 1, 1};
  g->nodes.push_back(conv);
  g->nodes.push_back(testing::make_node("relu", "Relu", {"h"}, {"y"}));
  return g;
}

TEST(GraphHash, SameNamesOtherWeightsDiffer) {
  // The mistake the key guards against: two models alike in every name, unlike in weights.
  EXPECT_EQ(graph_hash(*small_model(1)), graph_hash(*small_model(1)));
  EXPECT_NE(graph_hash(*small_model(1)), graph_hash(*small_model(2)));
}

TEST(GraphHash, OneWeightByteOrOneAttributeChangesIt) {
  const auto base = small_model(1);
  const std::uint64_t h = graph_hash(*base);

  Graph byte = *base;
  byte.initializers["W"] = base->initializers.at("W").clone();
  static_cast<unsigned char*>(byte.initializers["W"].raw_data())[17] ^= 1;
  EXPECT_NE(graph_hash(byte), h);

  Graph attribute = *base;
  attribute.nodes[0].attributes["pads"] = std::vector<std::int64_t>{0, 1, 1, 1};
  EXPECT_NE(graph_hash(attribute), h);

  Graph type = *base;  // the int 1 against the float 1
  type.nodes[1].attributes["alpha"] = std::int64_t{1};
  Graph type_float = *base;
  type_float.nodes[1].attributes["alpha"] = 1.0f;
  EXPECT_NE(graph_hash(type), graph_hash(type_float));

  Graph moved = *base;  // where the model came from is not what it computes
  moved.source = "/elsewhere/small.onnx";
  EXPECT_EQ(graph_hash(moved), h);
}

TEST(GraphHash, TwoLoadsOfAShippedModelAgree) {
  const auto file = testing::assets_dir() / "models" / "ch_PP-OCRv4_det_infer.onnx";
  if (!std::filesystem::exists(file)) GTEST_SKIP() << file << " is missing (scripts/setup.sh fetches it)";
  const std::uint64_t a = graph_hash(*load_onnx(file));
  const std::uint64_t b = graph_hash(*load_onnx(file));
  EXPECT_EQ(a, b);
  std::printf("PP-OCRv4 det: %s\n", hash_hex(a).c_str());
}

// ResNet-50 is about 100 MB of fp32 weights; hashing it is part of every GPU runner's start.
TEST(GraphHash, HashesAHundredMegabytesQuickly) {
  auto g = testing::make_x_to_y_graph("large");
  for (int i = 0; i < 25; ++i) {  // 25 tensors of 4 MB, as a network's layers
    Tensor t = Tensor::empty(DType::kF32, {1 << 20});
    std::memset(t.raw_data(), i, t.nbytes());
    g->initializers["w" + std::to_string(i)] = t;
  }
  graph_hash(*g);  // pages touched once
  const auto start = std::chrono::steady_clock::now();
  const std::uint64_t h = graph_hash(*g);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  // Its speed is printed, not asserted (tests check what it computes: above).
  std::printf("graph_hash of 100 MB: %.1f ms (%s)\n", ms, hash_hex(h).c_str());
  EXPECT_EQ(graph_hash(*g), h);
}

}  // namespace
}  // namespace redwood
