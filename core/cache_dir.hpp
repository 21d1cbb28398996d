#pragma once
// Where Redwood keeps what it measures and plans between runs (device profiles, measured node
// costs, tuned plans), and how those files are written: whole or not at all, so that a crash or a
// full disk never leaves a half file that a later run would read.

#include <filesystem>
#include <string>

namespace redwood {

/// $REDWOOD_CACHE_DIR when set, else $XDG_CACHE_HOME/redwood, else $HOME/.cache/redwood, else
/// the system's temporary directory's redwood-cache. Not created here.
std::filesystem::path cache_dir();

/// Writes `text` to `path`: the parent folders made, a temporary file beside it written and
/// renamed over it. Throws Error naming the path and the system's reason.
void write_file_atomically(const std::filesystem::path& path, const std::string& text);

}  // namespace redwood
