// MappedFile: the bytes of the file, read-only or copy-on-write (a write never reaches the file),
// an empty file, and a missing one as an IoError naming it.

#include "core/error.hpp"
#include "core/mapped_file.hpp"
#include "support/onnx_builder.hpp"

#include <gtest/gtest.h>

#include <fstream>

namespace redwood {
namespace {

std::filesystem::path write(const std::filesystem::path& file, const std::string& bytes) {
  std::ofstream(file, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return file;
}

TEST(MappedFile, HoldsTheFilesBytes) {
  const auto dir = testing::temp_dir("mapped-file");
  std::string bytes(3 * 4096 + 17, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 31);
  const auto file = write(dir / "f.bin", bytes);
  for (auto access : {MappedFile::Access::kReadOnly, MappedFile::Access::kCopyOnWrite}) {
    const auto m = MappedFile::open(file, access);
    EXPECT_EQ(m->size(), bytes.size());
    EXPECT_EQ(m->bytes(), bytes);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(m->data()) % 4096, 0u);
  }
}

TEST(MappedFile, AWriteThroughACopyOnWriteMappingNeverReachesTheFile) {
  const auto dir = testing::temp_dir("mapped-file-cow");
  const auto file = write(dir / "f.bin", std::string(8192, 'a'));
  {
    const auto m = MappedFile::open(file, MappedFile::Access::kCopyOnWrite);
    m->data()[5000] = std::byte{'b'};
    EXPECT_EQ(m->bytes()[5000], 'b');
    EXPECT_EQ(MappedFile::open(file)->bytes()[5000], 'a');
  }
  std::ifstream in(file, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), std::string(8192, 'a'));
}

TEST(MappedFile, AnEmptyFileHasNoBytesAndAMissingOneIsAnIoError) {
  const auto dir = testing::temp_dir("mapped-file-empty");
  EXPECT_EQ(MappedFile::open(write(dir / "empty", ""))->size(), 0u);
  try {
    MappedFile::open(dir / "missing");
    ADD_FAILURE() << "a missing file was mapped";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find((dir / "missing").string()), std::string::npos) << e.what();
  }
  EXPECT_THROW(MappedFile::open(dir), IoError);  // a folder
}

}  // namespace
}  // namespace redwood
