// The model cache behind load_onnx(file, {.cache = true}): the first load writes an entry keyed by
// the file's bytes, the next reads it back (proved by an entry swapped for another graph), an
// entry of another build or a damaged one is imported again and replaced, another byte is
// another entry, a model with external data is not cached, and a cache that cannot be written
// never fails a load.

#include "core/cache_dir.hpp"
#include "core/graph/graph_file.hpp"
#include "core/graph/graph_hash.hpp"
#include "core/onnx/model_cache.hpp"
#include "core/onnx/onnx_import.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <fstream>

namespace redwood {
namespace {

using testing::OnnxBuilder;

class ModelCache : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::temp_dir("model-cache");
    cache_ = std::make_unique<testing::ScopedEnv>("REDWOOD_CACHE_DIR", (dir_ / "cache").c_str());
    model_ = save_model(1.0f);
  }
  // y = x + w, w four copies of `value`.
  std::filesystem::path save_model(float value, const std::string& name = "add.onnx") {
    OnnxBuilder b(13);
    b.input("x", onnx::TensorProto::FLOAT, {4});
    b.initializer("w", Tensor::from_vector<float>({4}, {value, value, value, value}));
    b.node("Add", {"x", "w"}, {"y"}, "add");
    b.output("y", onnx::TensorProto::FLOAT, {4});
    b.save(dir_ / name);
    return dir_ / name;
  }
  std::string bytes(const std::filesystem::path& file) const {
    std::ifstream in(file, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  std::filesystem::path entry(const std::filesystem::path& model) const {
    return model_cache_file(model_cache_dir(), bytes(model), OnnxImportOptions{.cache = true});
  }
  static std::shared_ptr<Graph> load(const std::filesystem::path& model) {
    return load_onnx(model, OnnxImportOptions{.cache = true});
  }

  std::filesystem::path dir_, model_;
  std::unique_ptr<testing::ScopedEnv> cache_;
};

TEST_F(ModelCache, TheSecondLoadReadsTheEntryBack) {
  const auto imported = load(model_);
  const auto file = entry(model_);
  ASSERT_TRUE(std::filesystem::exists(file));
  EXPECT_EQ(file.parent_path(), dir_ / "cache" / "models");
  // Swap the entry for another graph of this build: the next load must return that one.
  auto other = std::make_shared<Graph>(*imported);
  other->name = "from the cache";
  write_graph_file(file, *other, build_stamp());
  const auto again = load(model_);
  EXPECT_EQ(again->name, "from the cache");
  EXPECT_EQ(again->source, model_.string());
  EXPECT_EQ(graph_hash(*again), graph_hash(*other));
}

TEST_F(ModelCache, WhatItReadsBackEqualsTheImport) {
  const auto imported = load(model_);
  const auto cached = load(model_);
  EXPECT_EQ(graph_hash(*imported), graph_hash(*cached));
  EXPECT_EQ(cached->initializers.at("w").to_float_vector(), (std::vector<float>{1, 1, 1, 1}));
}

TEST_F(ModelCache, AnEntryOfAnotherBuildOrDamagedIsImportedAgainAndReplaced) {
  const auto imported = load(model_);
  const auto file = entry(model_);
  auto other = std::make_shared<Graph>(*imported);
  other->name = "stale";
  write_graph_file(file, *other, "Redwood 0.0.1; an older build");
  EXPECT_NE(load(model_)->name, "stale");
  std::string stamp;
  read_graph_file(file, &stamp);
  EXPECT_EQ(stamp, build_stamp());

  std::ofstream(file, std::ios::binary | std::ios::trunc) << "RWGRAPH";  // cut short
  const auto reloaded = load(model_);
  EXPECT_EQ(graph_hash(*reloaded), graph_hash(*imported));
  EXPECT_NO_THROW(read_graph_file(file));  // written whole again
}

TEST_F(ModelCache, AnotherByteIsAnotherEntry) {
  const auto one = save_model(1.0f, "one.onnx");
  const auto two = save_model(2.0f, "two.onnx");
  EXPECT_NE(entry(one), entry(two));
  EXPECT_EQ(load(two)->initializers.at("w").to_float_vector(), (std::vector<float>{2, 2, 2, 2}));
  EXPECT_EQ(load(one)->initializers.at("w").to_float_vector(), (std::vector<float>{1, 1, 1, 1}));
  // The same bytes under another name share the entry.
  std::filesystem::copy_file(one, dir_ / "copy.onnx");
  EXPECT_EQ(entry(one), entry(dir_ / "copy.onnx"));
  // Other import options are another entry.
  EXPECT_NE(entry(one), model_cache_file(model_cache_dir(), bytes(one), OnnxImportOptions{.check = false, .cache = true}));
}

TEST_F(ModelCache, AModelWithExternalDataIsNotCached) {
  std::filesystem::create_directories(dir_ / "external");
  const float values[4] = {1, 2, 3, 4};
  std::ofstream(dir_ / "external" / "w.bin", std::ios::binary).write(reinterpret_cast<const char*>(values), sizeof values);
  const auto model = testing::model_with_external(dir_ / "external", "w.bin");
  EXPECT_EQ(load(model)->initializers.at("w").to_float_vector(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_FALSE(std::filesystem::exists(entry(model)));
}

TEST_F(ModelCache, ACacheThatCannotBeWrittenNeverFailsALoad) {
  std::ofstream(dir_ / "not-a-folder") << "x";
  testing::ScopedEnv blocked("REDWOOD_CACHE_DIR", (dir_ / "not-a-folder").c_str());
  const auto g = load(model_);
  EXPECT_EQ(g->initializers.at("w").to_float_vector(), (std::vector<float>{1, 1, 1, 1}));
}

TEST_F(ModelCache, WithoutTheOptionNothingIsWritten) {
  load_onnx(model_);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "cache"));
}

}  // namespace
}  // namespace redwood
