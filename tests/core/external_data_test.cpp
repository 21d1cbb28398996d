// ONNX external data: read from a file in the model's folder; a location that is absolute, climbs
// out of the folder or links out of it, a file that is not regular (a FIFO would block the load),
// an offset or length past the file's end, and byte counts that are not numbers are each one
// clear error naming the tensor.

#include "core/error.hpp"
#include "core/onnx/onnx_import.hpp"
#include "support/onnx_builder.hpp"

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

}  // namespace
}  // namespace redwood
