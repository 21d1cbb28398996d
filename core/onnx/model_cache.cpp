#include "core/onnx/model_cache.hpp"

#include "core/cache_dir.hpp"
#include "core/error.hpp"
#include "core/graph/graph_file.hpp"
#include "core/graph/graph_hash.hpp"
#include "core/log.hpp"
#include "core/onnx/onnx_import.hpp"

#include <fmt/format.h>

#include <atomic>

namespace redwood {

std::filesystem::path model_cache_dir() { return cache_dir() / "models"; }

std::filesystem::path model_cache_file(const std::filesystem::path& dir, std::string_view bytes,
                                       const OnnxImportOptions& options) {
  ContentHash rest;
  rest.add(static_cast<std::int64_t>(kGraphFileFormat));
  rest.add(static_cast<std::int64_t>(options.check));
  rest.add(static_cast<std::int64_t>(options.infer_shapes));
  return dir / fmt::format("{}-{}.rwgraph", hash_hex(xxh64(bytes.data(), bytes.size())), hash_hex(rest.digest()));
}

std::shared_ptr<Graph> read_model_cache(const std::filesystem::path& file, const std::string& source) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return nullptr;
  try {
    std::string stamp;
    std::shared_ptr<Graph> graph = read_graph_file(file, &stamp);
    if (stamp != build_stamp()) {
      log().debug("model cache: {} was made by another build ({}); importing {} again", file.string(), stamp, source);
      return nullptr;
    }
    graph->source = source;
    log().debug("model cache: {} read back from {}", source, file.string());
    return graph;
  } catch (const Error& e) {
    log().warn("model cache: not used: {}; importing {} again", e.what(), source);
    return nullptr;
  }
}

void write_model_cache(const std::filesystem::path& file, const Graph& graph) {
  try {
    write_graph_file(file, graph, build_stamp());
  } catch (const Error& e) {
    warn_once("model cache: not written", fmt::format("model cache: not written: {}", e.what()));
  }
}

}  // namespace redwood
