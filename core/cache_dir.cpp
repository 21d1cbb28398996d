#include "core/cache_dir.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <unistd.h>

namespace redwood {

std::filesystem::path cache_dir() {
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v != nullptr ? v : "";
  };
  if (const std::string dir = env("REDWOOD_CACHE_DIR"); !dir.empty()) return dir;
  if (const std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty()) return std::filesystem::path(xdg) / "redwood";
  if (const std::string home = env("HOME"); !home.empty()) return std::filesystem::path(home) / ".cache" / "redwood";
  return std::filesystem::temp_directory_path() / "redwood-cache";
}

void write_file_atomically(const std::filesystem::path& path, const std::string& text) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  RW_EXPECTS(!ec, Error, "{}: cannot create its folder: {}", path.string(), ec.message());
  // The process id keeps two processes writing the same file from sharing a temporary name.
  const std::filesystem::path tmp = path.string() + fmt::format(".tmp{}", static_cast<long>(::getpid()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    RW_EXPECTS(out.good(), Error, "{}: cannot write: {}", tmp.string(), std::strerror(errno));
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.flush();
    if (!out.good()) {
      const std::string why = std::strerror(errno);
      out.close();
      std::filesystem::remove(tmp, ec);
      throw Error(fmt::format("{}: cannot write: {}", tmp.string(), why));
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw Error(fmt::format("{}: cannot replace: {}", path.string(), ec.message()));
  }
}

}  // namespace redwood
