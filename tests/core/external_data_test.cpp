// ONNX external data: read from a file in the model's folder; a location that is absolute, climbs
// out of the folder or links out of it, a file that is not regular (a FIFO would block the load),
// an offset or length past the file's end, and byte counts that are not numbers are each one
// clear error naming the tensor.

#include "core/error.hpp"
#include "core/onnx/onnx_import.hpp"
#include "runtime/executor.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>

namespace redwood {
namespace {

using testing::OnnxBuilder;

using testing::model_with_external;

// Redwood's own checks run whether or not ONNX's checker runs first (it refuses some of the same).
std::string load_error(const std::filesystem::path& model) {
  try {
    load_onnx(model, OnnxImportOptions{.check = false});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ExternalData, ReadsTheFileBesideTheModelAndRefusesAnyOther) {
  const auto root = testing::temp_dir("external");
  const auto dir = root / "model";
  std::filesystem::create_directories(dir / "sub");
  const float w[4] = {1, 2, 3, 4};
  std::ofstream(dir / "sub" / "w.bin", std::ios::binary).write(reinterpret_cast<const char*>(w), sizeof w);
  std::ofstream(root / "secret.bin", std::ios::binary).write(reinterpret_cast<const char*>(w), sizeof w);

  // With ONNX's checker (the default): it looks for the file beside the model, not in the working directory.
  auto graph = load_onnx(model_with_external(dir, "sub/w.bin", "0", "16"));
  EXPECT_EQ(graph->initializers.at("w").to_float_vector(), (std::vector<float>{1, 2, 3, 4}));

  EXPECT_NE(load_error(model_with_external(dir, "../secret.bin")).find("outside the model's folder"), std::string::npos);
  EXPECT_NE(load_error(model_with_external(dir, (root / "secret.bin").string())).find("outside the model's folder"),
            std::string::npos);
  EXPECT_THROW(load_onnx(model_with_external(dir, (root / "secret.bin").string())), InvalidArgument);
  std::filesystem::create_symlink(root / "secret.bin", dir / "link.bin");
  EXPECT_NE(load_error(model_with_external(dir, "link.bin")).find("outside the model's folder"), std::string::npos);
  ASSERT_EQ(mkfifo((dir / "pipe").c_str(), 0600), 0);
  EXPECT_NE(load_error(model_with_external(dir, "pipe")).find("is not a regular file"), std::string::npos);
  EXPECT_NE(load_error(model_with_external(dir, "sub/w.bin", "8")).find("is truncated (16 bytes from offset 8 in a file of 16)"),
            std::string::npos);
  EXPECT_NE(load_error(model_with_external(dir, "sub/w.bin", "99999999999999999999")).find("offset '99999999999999999999'"),
            std::string::npos);
  EXPECT_NE(load_error(model_with_external(dir, "sub/w.bin", "", "x")).find("length 'x', not a byte count"),
            std::string::npos);
}

// Marks an initializer as kept in `location` at `offset`, `length` bytes long.
void make_external(onnx::TensorProto& t, const std::string& location, std::size_t offset, std::size_t length) {
  t.clear_raw_data();
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  for (const auto& [key, value] : {std::pair<std::string, std::string>{"location", location},
                                   {"offset", std::to_string(offset)},
                                   {"length", std::to_string(length)}}) {
    auto* kv = t.add_external_data();
    kv->set_key(key);
    kv->set_value(value);
  }
}

void write_at(std::fstream& file, std::size_t offset, const Tensor& t) {
  file.seekp(static_cast<std::streamoff>(offset));
  file.write(static_cast<const char*>(t.raw_data()), static_cast<std::streamsize>(t.nbytes()));
}

// One side file holding three tensors at their offsets (one not aligned to its element size), as
// exporters write models whose weights exceed protobuf's 2 GiB: each tensor is read from its
// offset straight into its buffer, and the model's protobuf never holds the weights.
TEST(ExternalData, TensorsAreReadAtTheirOffsetsInOneFile) {
  const auto dir = testing::temp_dir("external-offsets");
  const Tensor w = Tensor::from_vector<float>({4}, {1.f, 2.f, 3.f, 4.f});
  const Tensor h = Tensor::from_vector<float>({4}, {0.5f, -1.f, 10.f, 0.25f}).cast(DType::kF16);
  const Tensor i = Tensor::from_vector<std::int64_t>({2}, {-7, 1LL << 40});
  {
    std::fstream out(dir / "weights.bin", std::ios::binary | std::ios::out | std::ios::trunc);
    out << std::string(4096 + 16, '\xee');  // filler around the tensors
    write_at(out, 0, w);
    write_at(out, 19, h);
    write_at(out, 4096, i);
  }
  OnnxBuilder b(13);
  b.input("x", onnx::TensorProto::FLOAT, {4});
  b.initializer("w", w).initializer("h", h).initializer("i", i);
  auto& inits = *b.model().mutable_graph()->mutable_initializer();
  make_external(inits[0], "weights.bin", 0, 16);
  make_external(inits[1], "weights.bin", 19, 8);
  make_external(inits[2], "weights.bin", 4096, 16);
  OnnxBuilder::set_attr(b.node("Cast", {"h"}, {"hf"}, "cast"), "to", std::int64_t{onnx::TensorProto::FLOAT});
  b.node("Add", {"x", "w"}, {"s"}, "add");
  b.node("Add", {"s", "hf"}, {"y"}, "add_2");
  b.output("y", onnx::TensorProto::FLOAT, {4});
  b.save(dir / "model.onnx");
  EXPECT_LT(std::filesystem::file_size(dir / "model.onnx"), 1000u);

  const auto graph = load_onnx(dir / "model.onnx");  // ONNX's checker too, finding the file beside the model
  EXPECT_EQ(graph->initializers.at("w").to_float_vector(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(graph->initializers.at("h").dtype(), DType::kF16);
  EXPECT_EQ(graph->initializers.at("h").to_float_vector(), (std::vector<float>{0.5f, -1.f, 10.f, 0.25f}));
  EXPECT_EQ(graph->initializers.at("i").to_int64_vector(), (std::vector<std::int64_t>{-7, 1LL << 40}));
  Executor exec(graph);
  EXPECT_EQ(exec.run({{"x", Tensor::zeros(DType::kF32, {4})}})[0].to_float_vector(),
            (std::vector<float>{1.5f, 1.f, 13.f, 4.25f}));
}

TEST(ExternalData, AFileTooShortIsAnErrorNamingTheTensorAndTheFile) {
  const auto dir = testing::temp_dir("external-short");
  std::ofstream(dir / "w.bin", std::ios::binary) << std::string(20, '\0');
  const auto model = model_with_external(dir, "w.bin", "8", "16");  // bytes 8 to 24 of 20
  const std::string file = (dir / "w.bin").string();
  for (const bool check : {true, false}) {
    EXPECT_THROWS_SAYING(load_onnx(model, {.check = check}), InvalidArgument, "external data of tensor 'w'",
                         file.c_str(), "is truncated (16 bytes from offset 8 in a file of 20)");
  }
}

// The branch an If takes brings its initializers, external ones too; a model with external data
// anywhere, in a branch too, stays out of the model cache (its bytes do not cover its weights).
TEST(ExternalData, ABranchsInitializerReadsItsFileAndTheModelIsNotCached) {
  const auto dir = testing::temp_dir("external-branch");
  testing::ScopedEnv cache_dir("REDWOOD_CACHE_DIR", (dir / "cache").c_str());
  const Tensor k = Tensor::from_vector<float>({4}, {2.f, 4.f, 6.f, 8.f});
  {
    std::fstream out(dir / "k.bin", std::ios::binary | std::ios::out | std::ios::trunc);
    write_at(out, 0, k);
  }
  OnnxBuilder then_branch;
  then_branch.initializer("k", k);
  make_external(*then_branch.model().mutable_graph()->mutable_initializer(0), "k.bin", 0, 16);
  then_branch.node("Mul", {"x", "k"}, {"t"});
  then_branch.output("t", onnx::TensorProto::FLOAT, {4});
  OnnxBuilder else_branch;
  else_branch.node("Neg", {"x"}, {"e"});
  else_branch.output("e", onnx::TensorProto::FLOAT, {4});
  OnnxBuilder b(13);
  b.input("x", onnx::TensorProto::FLOAT, {4});
  b.initializer("cond", Tensor::scalar<bool>(true));
  auto& n = b.node("If", {"cond"}, {"y"}, "choose");
  OnnxBuilder::set_attr(n, "then_branch", then_branch.model().graph());
  OnnxBuilder::set_attr(n, "else_branch", else_branch.model().graph());
  b.output("y", onnx::TensorProto::FLOAT, {4});
  b.save(dir / "model.onnx");

  const auto graph = load_onnx(dir / "model.onnx", {.cache = true});
  EXPECT_EQ(graph->initializers.at("choose/k").to_float_vector(), (std::vector<float>{2, 4, 6, 8}));
  EXPECT_FALSE(std::filesystem::exists(dir / "cache" / "models") && !std::filesystem::is_empty(dir / "cache" / "models"));
}

}  // namespace
}  // namespace redwood
