#pragma once
// LineFile: a text file that only ever holds complete lines. append() writes whole lines with
// write(2) (no user-space buffer: what returned is in the kernel's hands, so a killed process
// loses nothing it wrote); when a write fails part-way (a full disk, a file-size limit) the file
// is cut back to the end of the last complete line and the error is thrown, naming the file.

#include <cstdint>
#include <filesystem>
#include <string_view>

namespace redwood {

class LineFile {
 public:
  /// Creates or truncates `path` (its folders too); throws IoError naming it when it cannot.
  explicit LineFile(const std::filesystem::path& path);
  ~LineFile();
  LineFile(const LineFile&) = delete;
  LineFile& operator=(const LineFile&) = delete;

  /// Appends `lines` (complete lines, each ending in '\n'). On failure the file keeps only what
  /// it held before this call, and IoError says why.
  void append(std::string_view lines);
  /// The bytes the file holds, all complete lines.
  std::uint64_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

}  // namespace redwood
