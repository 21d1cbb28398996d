// Labels files: one class per line in id order, trimmed; an empty line inside is an error naming
// its line (it would shift every id after it).

#include "stages/postprocess/labels.hpp"

#include "stages/params.hpp"
#include "support/onnx_builder.hpp"

#include <gtest/gtest.h>

#include <fstream>

namespace redwood {
namespace {

std::filesystem::path write(const std::string& name, const std::string& text) {
  const auto dir = testing::temp_dir("labels");
  std::ofstream(dir / name) << text;
  return dir / name;
}

TEST(Labels, OneClassPerLineTrimmed) {
  const auto labels = read_labels(write("coco.txt", "person\r\n  bicycle \ntraffic light\n\n"));
  ASSERT_EQ(labels, (std::vector<std::string>{"person", "bicycle", "traffic light"}));
  EXPECT_EQ(label_of(labels, 2), "traffic light");
  EXPECT_EQ(label_of(labels, 3), "3");
  EXPECT_EQ(label_of(labels, -1), "-1");
}

TEST(Labels, AnEmptyLineInsideNamesItsLine) {
  const auto path = write("gap.txt", "a\nb\n\nc\n");
  try {
    read_labels(path);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(path.string() + ":3: empty label"), std::string::npos) << e.what();
  }
}

TEST(Labels, MissingOrEmptyFilesFail) {
  EXPECT_THROW(read_labels("/nonexistent/labels.txt"), ConfigError);
  EXPECT_THROW(read_labels(write("empty.txt", "\n \n")), ConfigError);
}

}  // namespace
}  // namespace redwood
