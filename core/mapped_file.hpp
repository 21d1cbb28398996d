#pragma once
// A file mapped into memory, read-only to other processes: what the model cache hashes (a model
// file's bytes) and reads back (a graph file's tensors are views of the mapping). The mapping is
// private and writable: a write (a pass that rewrites an initializer in place) copies the page
// for this process and never reaches the file. The pages are read in at open (MAP_POPULATE), in
// one call rather than one fault each, which on a virtual machine is most of a large file's
// cost.

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string_view>

namespace redwood {

class MappedFile {
 public:
  /// Maps `path` whole. Throws IoError naming the file and the system's reason.
  static std::shared_ptr<MappedFile> open(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::string_view bytes() const { return {reinterpret_cast<const char*>(data_), size_}; }

 private:
  MappedFile(std::byte* data, std::size_t size) : data_(data), size_(size) {}
  std::byte* data_;  // page-aligned; nullptr for an empty file
  std::size_t size_;
};

}  // namespace redwood
