#include "core/mapped_file.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace redwood {

std::shared_ptr<MappedFile> MappedFile::open(const std::filesystem::path& path, Access access) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  RW_EXPECTS(fd >= 0, IoError, "{}: cannot open: {}", path.string(), std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const std::string why = S_ISREG(st.st_mode) ? std::strerror(errno) : "not a regular file";
    ::close(fd);
    throw IoError(fmt::format("{}: cannot read: {}", path.string(), why));
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  void* data = nullptr;
  if (size > 0) {
    data = access == Access::kReadOnly ? ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0)
                                       : ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      throw IoError(fmt::format("{}: cannot map: {}", path.string(), why));
    }
  }
  ::close(fd);  // the mapping keeps the file
  return std::shared_ptr<MappedFile>(new MappedFile(static_cast<std::byte*>(data), size));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

}  // namespace redwood
