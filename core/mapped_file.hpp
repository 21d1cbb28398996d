#pragma once
// A file mapped into memory: what the model cache hashes (a model file's bytes, read-only) and
// reads back (a graph file's tensors are views of the mapping, copy-on-write). Either way the
// mapping is private: nothing written through it reaches the file.
//
//   kReadOnly     PROT_READ, the pages mapped at open (MAP_POPULATE: one call, not a fault per
//                 page, and no copy: they are the page cache's)
//   kCopyOnWrite  PROT_READ | PROT_WRITE, the pages mapped as they are read; a write (code that
//                 rewrites a tensor in place) copies that page for this process. Not populated:
//                 populating a writable private mapping copies every page at once (10 MB: 45 ms
//                 against 8 ms on the 2-core VM)

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string_view>

namespace redwood {

class MappedFile {
 public:
  enum class Access { kReadOnly, kCopyOnWrite };
  /// Maps `path` whole. Throws IoError naming the file and the system's reason.
  static std::shared_ptr<MappedFile> open(const std::filesystem::path& path, Access access = Access::kReadOnly);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  /// Written only through a kCopyOnWrite mapping (a read-only one faults).
  std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::string_view bytes() const { return {reinterpret_cast<const char*>(data_), size_}; }

 private:
  MappedFile(std::byte* data, std::size_t size) : data_(data), size_(size) {}
  std::byte* data_;  // page-aligned; nullptr for an empty file
  std::size_t size_;
};

}  // namespace redwood
