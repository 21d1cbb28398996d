#pragma once
// The model cache: an imported ONNX model kept in Redwood's own graph file
// (core/graph/graph_file.hpp), so that loading the same bytes again skips protobuf, ONNX's checker
// and shape inference, and the conversion to the IR (docs/planner.md, "Plan cache").
//
//   load_onnx(file, {.cache = true})
//     read the file ─► XXH64 of its bytes ─► <cache>/models/<hash>-<options>.rwgraph
//       of this build ─► read it back: the initializers are views of one buffer, nothing parsed
//       missing, damaged or of another build ─► import, then write the entry (whole or not at all)
//
// The key is the file's bytes (never its name or path), the import options and the build
// (core/cache_dir.hpp: build_stamp, kept in the entry: an entry of another build is replaced, so
// that a rebuilt importer never serves an old import). A model with external data is not cached:
// its bytes do not cover its weights. Nothing about the cache fails a load: an entry that cannot
// be read is logged at warn, naming the file and why, and the model imported again; one that
// cannot be written is logged at warn once.

#include "core/graph/graph.hpp"

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace redwood {

struct OnnxImportOptions;

/// cache_dir() / "models".
std::filesystem::path model_cache_dir();

/// The entry for a model file's `bytes` imported with `options`, in `dir`:
/// "<16 hex digits of the bytes' XXH64>-<16 of the options'>.rwgraph".
std::filesystem::path model_cache_file(const std::filesystem::path& dir, std::string_view bytes,
                                       const OnnxImportOptions& options);

/// The graph an entry holds, its `source` set to `source`; nullptr (and a warning naming the file
/// and why, unless it is missing) when it is missing, damaged or of another build.
std::shared_ptr<Graph> read_model_cache(const std::filesystem::path& file, const std::string& source);

/// Writes the entry; a failure is a warning (once per process), never an error.
void write_model_cache(const std::filesystem::path& file, const Graph& graph);

}  // namespace redwood
