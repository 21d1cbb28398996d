#pragma once
// Redwood's own file for a Graph: what the model cache (core/onnx/model_cache.hpp) keeps so that a
// restart reads an imported model back instead of parsing, checking and shape-inferring its ONNX
// file again (about 10x faster for ResNet-50's 100 MB; docs/planner.md, "Plan cache").
//
//   "RWGRAPH\0" | format (u32) | 0 (u32) | description bytes (u64) | description | pad | tensor data
//
// (the description ends with the data section's size, so that a file cut anywhere is refused).
//
// The description holds every field of the Graph (names, value infos, nodes with their attributes
// and bodies, initializers' dtypes and shapes) in little-endian fixed-width numbers and
// length-prefixed strings; a tensor there is its dtype, shape and the offset of its bytes in the
// data section, where every tensor begins 64-byte aligned. Reading maps the file
// (core/mapped_file.hpp) and the tensors are views of the mapping (no copy): it lives while any of
// them does.
//
// What must hold: read_graph_file never trusts the file; a truncated, corrupt or foreign file is
// an InvalidArgument naming the file and the first thing wrong, never a crash or a partial graph.

#include "core/graph/graph.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

namespace redwood {

/// The layout's version: a file of another version is refused (and a cache rebuilds it).
inline constexpr std::uint32_t kGraphFileFormat = 1;

/// Writes `graph` to `path` whole or not at all (a temporary file renamed over it, folders made),
/// with `stamp`, a line its writer wants back (a cache's key). `source` is not written (the
/// reader's caller knows where the model came from). Throws Error naming the file and the
/// system's reason.
void write_graph_file(const std::filesystem::path& path, const Graph& graph, const std::string& stamp = "");

/// Reads a file write_graph_file wrote, and its stamp into `stamp` when given. Throws IoError when
/// it cannot be read, InvalidArgument when it is not such a file or is damaged (naming the file
/// and what).
std::shared_ptr<Graph> read_graph_file(const std::filesystem::path& path, std::string* stamp = nullptr);

}  // namespace redwood
