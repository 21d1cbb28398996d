#include "stages/sink/line_file.hpp"

#include "core/error.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace redwood {

LineFile::LineFile(const std::filesystem::path& path) : path_(path) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  RW_EXPECTS(fd_ >= 0, IoError, "cannot write '{}': {}", path.string(), std::strerror(errno));
}

LineFile::~LineFile() {
  if (fd_ >= 0) ::close(fd_);
}

void LineFile::append(std::string_view lines) {
  std::size_t done = 0;
  while (done < lines.size()) {
    const ssize_t n = ::write(fd_, lines.data() + done, lines.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : ENOSPC;
      // Cut back to the last complete line, so that a reader never meets half an object.
      if (done > 0 && ::ftruncate(fd_, static_cast<off_t>(size_)) == 0) ::lseek(fd_, static_cast<off_t>(size_), SEEK_SET);
      throw IoError(fmt::format("cannot write '{}': {} (it holds {} bytes of complete lines)", path_.string(),
                                std::strerror(error), size_));
    }
    done += static_cast<std::size_t>(n);
  }
  size_ += lines.size();
}

}  // namespace redwood
