#include "core/cache_dir.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "redwood/config.hpp"

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace redwood {

std::string redwood_version() { return REDWOOD_VERSION; }

std::string build_stamp() {
  static const std::string stamp = [] {
    std::error_code ec;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) return fmt::format("Redwood {}", redwood_version());
    struct stat st {};
    if (::stat(exe.c_str(), &st) != 0) return fmt::format("Redwood {}", redwood_version());
    return fmt::format("Redwood {}; {} {} bytes, modified {}.{:09d}", redwood_version(), exe.filename().string(),
                       static_cast<long long>(st.st_size), static_cast<long long>(st.st_mtim.tv_sec),
                       static_cast<long>(st.st_mtim.tv_nsec));
  }();
  return stamp;
}

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
  write_file_atomically(path, [&](std::ostream& out) { out.write(text.data(), static_cast<std::streamsize>(text.size())); });
}

void write_file_atomically(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  RW_EXPECTS(!ec, Error, "{}: cannot create its folder: {}", path.string(), ec.message());
  // The process id and a counter keep two writers of the same file (other processes, or other
  // threads of this one) from sharing a temporary name.
  static std::atomic<unsigned> serial{0};
  const std::filesystem::path tmp =
      path.string() + fmt::format(".tmp{}-{}", static_cast<long>(::getpid()), serial.fetch_add(1));
  auto discard = [&] {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
  };
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    RW_EXPECTS(out.good(), Error, "{}: cannot write: {}", tmp.string(), std::strerror(errno));
    try {
      write(out);
    } catch (...) {
      out.close();
      discard();
      throw;
    }
    out.flush();
    if (!out.good()) {
      const std::string why = std::strerror(errno);
      out.close();
      discard();
      throw Error(fmt::format("{}: cannot write: {}", tmp.string(), why));
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    discard();
    throw Error(fmt::format("{}: cannot replace: {}", path.string(), ec.message()));
  }
}

void warn_once(const std::string& key, const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> said;
  std::lock_guard lock(mutex);
  if (said.insert(key).second) log().warn("{}", message);
}

}  // namespace redwood
