#pragma once
// Where Redwood keeps what it measures and plans between runs (device profiles, measured node
// costs, tuned plans), and how those files are written: whole or not at all, so that a crash or a
// full disk never leaves a half file that a later run would read.

#include <filesystem>
#include <functional>
#include <iosfwd>
#include <string>

namespace redwood {

/// Redwood's version (the project version in the top CMakeLists.txt), part of every cache's key.
std::string redwood_version();

/// What tells this build of Redwood from another: its version and the running executable's size
/// and modification time (Redwood's libraries are static, so a rebuild changes the executable).
/// Caches of what Redwood's own code derived (the model cache) keep it, and a file of another
/// build is made again.
std::string build_stamp();

/// $REDWOOD_CACHE_DIR when set, else $XDG_CACHE_HOME/redwood, else $HOME/.cache/redwood, else
/// the system's temporary directory's redwood-cache. Not created here.
std::filesystem::path cache_dir();

/// Writes `text` to `path`: the parent folders made, a temporary file beside it written and
/// renamed over it. Throws Error naming the path and the system's reason.
void write_file_atomically(const std::filesystem::path& path, const std::string& text);
/// The same, with the content written by `write` into the temporary file's stream (for files too
/// large to build in memory first). An exception from `write` removes the temporary file.
void write_file_atomically(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write);

/// Logs `message` as a warning the first time `key` is seen in this process, and nothing after:
/// a cache that cannot be written (a read-only folder, a full disk) says so in one line however
/// many entries a run tries to write, and the run goes on without it.
void warn_once(const std::string& key, const std::string& message);

}  // namespace redwood
